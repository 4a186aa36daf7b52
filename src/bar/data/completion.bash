# bash completion for bar, written by `bar completion bash` for this version of bar.
# Install: add this line to ~/.bashrc (run `bar completion bash` again after an upgrade)
#     eval "$(bar completion bash)"
# Task names and step ids come from `bar __complete`, run on each Tab where they are due.

@TABLE@
# __bar_has KEY WORD: whether WORD is one of the entries of KEY
__bar_has() {
    local line
    __bar_spec "$1"
    while IFS= read -r line; do
        [[ ${line%%$'\t'*} == "$2" ]] && return 0
    done <<<"$REPLY"
    return 1
}

# __bar_add PREFIX CUR: offer PREFIX and each word of REPLY (word<TAB>help lines) that
# starts with CUR
__bar_add() {
    local line word
    while IFS= read -r line; do
        word=${line%%$'\t'*}
        [[ -n $word && $word == "$2"* ]] && COMPREPLY+=("$1$word")
    done <<<"$REPLY"
}

# __bar_files PREFIX CUR [-d]: offer the files (with -d, directories) that start with CUR
__bar_files() {
    local line
    compopt -o filenames 2>/dev/null
    while IFS= read -r line; do
        [[ -n $line ]] && COMPREPLY+=("$1$line")
    done < <(compgen "${3:--f}" -- "$2")
}

# __bar_values SPEC CUR TASK PREFIX: offer what SPEC (a V: or P: entry) takes
__bar_values() {
    local kind=${1%%$'\n'*}
    case $kind in
    '' | none) ;;
    choices)
        REPLY=${1#*$'\n'}
        __bar_add "$4" "$2"
        ;;
    file) __bar_files "$4" "$2" ;;
    dir) __bar_files "$4" "$2" -d ;;
    *)
        REPLY=$("$__bar_exe" __complete "$kind" ${3:+--task "$3"} -- "$2" 2>/dev/null)
        __bar_add "$4" "$2"
        ;;
    esac
}

# __bar_command N: complete words N.. as a command line of its own (`bar run -- CMD`)
__bar_command() {
    local line
    if declare -F _command_offset >/dev/null; then
        _command_offset "$1"
    elif (($1 == COMP_CWORD)); then
        while IFS= read -r line; do COMPREPLY+=("$line"); done < <(compgen -c -- "$cur")
    else
        __bar_files "" "$cur"
    fi
}

_bar() {
    local __bar_exe=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]}
    local where='' npos=0 task='' expect='' dashdash=0 i w line
    command -v "$__bar_exe" >/dev/null 2>&1 || __bar_exe=bar
    COMPREPLY=()
    # The words before the cursor: where on the command tree they lead, how many
    # positionals they hold, and which task a --task option names.
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        [[ $w == = && $dashdash == 0 ]] && continue # readline splits --opt=value at '='
        if [[ -n $expect ]]; then
            __bar_spec "V:$where $expect"
            [[ $REPLY == task ]] && task=$w
            expect=''
            continue
        fi
        if ((!dashdash)); then
            if [[ $w == -- ]]; then
                dashdash=1
                continue
            elif [[ $w == --*=* ]]; then
                __bar_spec "V:$where ${w%%=*}"
                [[ $REPLY == task ]] && task=${w#*=}
                continue
            elif [[ $w == -?* ]]; then
                __bar_spec "V:$where $w"
                if [[ -n $REPLY ]]; then
                    expect=$w
                elif [[ $w != --* ]]; then # -tNAME: a short option with its value attached
                    __bar_spec "V:$where ${w:0:2}"
                    [[ $REPLY == task ]] && task=${w:2}
                fi
                continue
            elif __bar_has "S:$where" "$w"; then
                where="${where:+$where }$w"
                continue
            fi
        fi
        __bar_spec "P:$where $npos"
        [[ -z $REPLY ]] && __bar_spec "P:$where rest"
        if [[ $REPLY == command ]]; then
            __bar_command "$i"
            return
        fi
        npos=$((npos + 1))
    done

    if [[ -n $expect ]]; then
        [[ $cur == = ]] && cur=''
        __bar_spec "V:$where $expect"
        __bar_values "$REPLY" "$cur" "$task" ""
        return
    fi
    if ((!dashdash)); then
        if [[ $cur == --*=* ]]; then # '=' is not a word break here
            __bar_spec "V:$where ${cur%%=*}"
            __bar_values "$REPLY" "${cur#*=}" "$task" "${cur%%=*}="
            return
        elif [[ $cur == -* ]]; then
            __bar_spec "O:$where"
            __bar_add "" "$cur"
            return
        fi
        __bar_spec "S:$where"
        if [[ -n $REPLY ]]; then
            __bar_add "" "$cur"
            return
        fi
    fi
    __bar_spec "P:$where $npos"
    [[ -z $REPLY ]] && __bar_spec "P:$where rest"
    if [[ $REPLY == command ]]; then
        __bar_command "$COMP_CWORD"
    elif [[ -n $REPLY ]]; then
        __bar_values "$REPLY" "$cur" "$task" ""
    elif ((!dashdash)); then # nothing positional left: the options
        __bar_spec "O:$where"
        __bar_add "" "$cur"
    fi
}

complete -F _bar bar
