# What both demos share, sourced after $work is made: a git identity of the demo's own
# (the developer's global config is never read or written), and the printing of each
# command as it runs.

export NO_COLOR=1
export GIT_CONFIG_GLOBAL="$work/gitconfig" GIT_CONFIG_NOSYSTEM=1
git config --file "$GIT_CONFIG_GLOBAL" user.name "Demo Developer"
git config --file "$GIT_CONFIG_GLOBAL" user.email "dev@example.com"
git config --file "$GIT_CONFIG_GLOBAL" init.defaultBranch main
git config --file "$GIT_CONFIG_GLOBAL" advice.detachedHead false

# each word shell-quoted, so that a printed line pasted into a shell runs what the demo ran
quoted() {
    local word out=()
    for word in "$@"; do
        if [[ $word =~ ^[A-Za-z0-9_./=:@%+,-]+$ ]]; then
            out+=("$word")
        else
            out+=("'${word//\'/\'\\\'\'}'")
        fi
    done
    printf '%s' "${out[*]}"
}

# the command line, in bold, before the command runs
show() { printf '\n\033[1m$ %s\033[0m\n' "$(quoted "$@")"; }
