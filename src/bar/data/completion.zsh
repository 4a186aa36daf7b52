#compdef bar
# zsh completion for bar, written by `bar completion zsh` for this version of bar.
# Install it where zsh looks for completion functions, then start a new shell:
#     bar completion zsh > "${fpath[1]}/_bar"
# or add this line to ~/.zshrc, after `compinit` (run it again after an upgrade):
#     source <(bar completion zsh)
# Task names and step ids come from `bar __complete`, run on each Tab where they are due.

@TABLE@
# __bar_has KEY WORD: whether WORD is one of the entries of KEY
__bar_has() {
    local line
    __bar_spec "$1"
    for line in "${(@f)REPLY}"; do
        [[ ${line%%$'\t'*} == "$2" ]] && return 0
    done
    return 1
}

# __bar_add: offer each word of REPLY (word<TAB>help lines), its help beside it
__bar_add() {
    local line
    local -a vals shown
    for line in "${(@f)REPLY}"; do
        [[ -z $line ]] && continue
        vals+=("${line%%$'\t'*}")
        if [[ $line == *$'\t'* ]]; then
            shown+=("${line%%$'\t'*}  -- ${line#*$'\t'}")
        else
            shown+=("$line")
        fi
    done
    (($#vals)) && compadd -l -d shown -a vals
}

# __bar_values SPEC TASK: offer what SPEC (a V: or P: entry) takes
__bar_values() {
    local kind=${1%%$'\n'*}
    case $kind in
    '' | none) ;;
    choices)
        local -a choices
        choices=("${(@f)${1#*$'\n'}}")
        compadd -a choices
        ;;
    file) _files ;;
    dir) _files -/ ;;
    *)
        REPLY=$("$__bar_exe" __complete "$kind" ${2:+--task} ${2:+"$2"} -- "$PREFIX" 2>/dev/null)
        __bar_add
        ;;
    esac
}

# __bar_command N: complete words N.. as a command line of its own (`bar run -- CMD`)
__bar_command() {
    words=("${(@)words[$1,-1]}")
    ((CURRENT -= $1 - 1))
    _normal
}

_bar() {
    local __bar_exe=${words[1]} where='' task='' expect='' w i
    integer npos=0 dashdash=0
    (($+commands[$__bar_exe])) || [[ -x $__bar_exe ]] || __bar_exe=bar
    # The words before the cursor: where on the command tree they lead, how many
    # positionals they hold, and which task a --task option names.
    for ((i = 2; i < CURRENT; i++)); do
        w=${words[i]}
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
                    __bar_spec "V:$where ${w[1,2]}"
                    [[ $REPLY == task ]] && task=${w[3,-1]}
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
            __bar_command $i
            return
        fi
        ((npos++))
    done

    if [[ -n $expect ]]; then
        __bar_spec "V:$where $expect"
        __bar_values "$REPLY" "$task"
        return
    fi
    if ((!dashdash)); then
        if [[ $PREFIX == --*=* ]]; then
            __bar_spec "V:$where ${PREFIX%%=*}"
            compset -P '*='
            __bar_values "$REPLY" "$task"
            return
        elif [[ $PREFIX == -* ]]; then
            __bar_spec "O:$where"
            __bar_add
            return
        fi
        __bar_spec "S:$where"
        if [[ -n $REPLY ]]; then
            __bar_add
            return
        fi
    fi
    __bar_spec "P:$where $npos"
    [[ -z $REPLY ]] && __bar_spec "P:$where rest"
    if [[ $REPLY == command ]]; then
        __bar_command $CURRENT
    elif [[ -n $REPLY ]]; then
        __bar_values "$REPLY" "$task"
    elif ((!dashdash)); then # nothing positional left: the options
        __bar_spec "O:$where"
        __bar_add
    fi
}

if [[ $funcstack[1] == _bar ]]; then
    _bar "$@" # loaded from $fpath on the first Tab: this file is _bar's body
else
    compdef _bar bar
fi
