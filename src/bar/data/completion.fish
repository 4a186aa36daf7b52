# fish completion for bar, written by `bar completion fish` for this version of bar.
# Install (run it again after an upgrade):
#     bar completion fish > ~/.config/fish/completions/bar.fish
# Task names and step ids come from `bar __complete`, run on each Tab where they are due.

@TABLE@
# __bar_has KEY WORD: whether WORD is one of the entries of KEY
function __bar_has
    for line in (__bar_spec $argv[1])
        test (string split -m 1 \t -- $line)[1] = "$argv[2]"; and return 0
    end
    return 1
end

# __bar_is KEY SPEC: whether KEY's entries, joined, are SPEC
function __bar_is
    set -l spec (__bar_spec $argv[1])
    test "$spec" = "$argv[2]"
end

# __bar_values CUR TASK PREFIX SPEC...: print what SPEC (a V: or P: entry) takes
function __bar_values
    set -l cur $argv[1]
    set -l prefix $argv[3]
    set -l spec $argv[4..-1]
    switch "$spec[1]"
        case '' none
        case choices
            printf "$prefix%s\n" $spec[2..-1]
        case file
            printf "$prefix%s\n" (__fish_complete_path $cur)
        case dir
            printf "$prefix%s\n" (__fish_complete_directories $cur)
        case '*'
            set -l task
            test -n "$argv[2]"; and set task --task $argv[2]
            set -l exe (commandline -opc)[1]
            command -q $exe; or set exe bar
            printf "$prefix%s\n" ($exe __complete $spec[1] $task -- $cur 2>/dev/null)
    end
end

# __bar_positional WHERE N: the spec of the N-th positional of WHERE
function __bar_positional
    set -l spec (__bar_spec "P:$argv[1] $argv[2]")
    test -n "$spec"; or set spec (__bar_spec "P:$argv[1] rest")
    printf '%s\n' $spec
end

# What the command line so far asks for at the cursor, one candidate a line.
function __bar_complete
    set -l words (commandline -opc) # the words before the cursor
    set -l cur (commandline -ct)
    set -l where ''
    set -l npos 0
    set -l task ''
    set -l expect ''
    set -l dashdash 0
    set -l i 1
    # Where on the command tree those words lead, how many positionals they hold, and
    # which task a --task option names.
    for w in $words[2..-1]
        set i (math $i + 1)
        if test -n "$expect"
            __bar_is "V:$where $expect" task; and set task $w
            set expect ''
            continue
        end
        if test $dashdash = 0
            if test "$w" = --
                set dashdash 1
                continue
            else if string match -q -- '--*=*' $w
                set -l parts (string split -m 1 = -- $w)
                __bar_is "V:$where $parts[1]" task; and set task $parts[2]
                continue
            else if string match -q -- '-?*' $w
                if not __bar_is "V:$where $w" ''
                    set expect $w
                else if not string match -q -- '--*' $w # -tNAME: its value attached
                    set -l opt (string sub -l 2 -- $w)
                    __bar_is "V:$where $opt" task
                    and set task (string sub -s 3 -- $w)
                end
                continue
            else if __bar_has "S:$where" $w
                set where (string trim -- "$where $w")
                continue
            end
        end
        if __bar_is "P:$where $npos" command; or begin
            __bar_is "P:$where $npos" ''; and __bar_is "P:$where rest" command
        end
            complete -C (string join ' ' -- (string escape -- $words[$i..-1]) $cur)
            return
        end
        set npos (math $npos + 1)
    end

    if test -n "$expect"
        __bar_values $cur $task '' (__bar_spec "V:$where $expect")
        return
    end
    if test $dashdash = 0
        if string match -q -- '--*=*' $cur
            set -l parts (string split -m 1 = -- $cur)
            __bar_values $parts[2] $task "$parts[1]=" (__bar_spec "V:$where $parts[1]")
            return
        else if string match -q -- '-*' $cur
            __bar_spec "O:$where"
            return
        end
        set -l subs (__bar_spec "S:$where")
        if test -n "$subs"
            printf '%s\n' $subs
            return
        end
    end
    set -l spec (__bar_positional "$where" $npos)
    if test "$spec" = command
        complete -C "$cur"
    else if test -n "$spec"
        __bar_values $cur $task '' $spec
    else if test $dashdash = 0 # nothing positional left: the options
        __bar_spec "O:$where"
    end
end

complete -c bar -e
complete -c bar -f -a '(__bar_complete)'
