"""The default policy on six classes of commands it once let through, each next to
look-alikes that must still pass:

1. recursive deletes outside the task's worktree (under ``~``, above ``.``, through
   ``..``; an absolute path outside the temporary directories is only warned about);
2. abbreviated long options (``git reset --har``, ``rm --rec``);
3. globs and expansions that reach the home directory or the root;
4. git configuration that runs commands or forces a push (``-c``, ``git config``,
   ``GIT_CONFIG_*``, transport programs), ``send-pack --force``, ``push --mirror``;
5. wrappers and programs that run a command (``setsid``, ``flock``, ``tmux``…);
6. decoded scripts piped to a shell.

Every line here is only analysed as text; nothing is run.
"""

from __future__ import annotations

from functools import cache

import pytest

from bar.policy import Decision, Policy, default_policy
from bar.shell import analyse_line


@cache
def _policy() -> Policy:
    """Parsed once for the module's hundreds of lines (a tenth of a second each time)."""
    return default_policy()


def decide(line: str) -> Decision:
    return _policy().evaluate_line(line)


def rules(line: str) -> set[str]:
    return {event.rule for event in decide(line).events}


def views(line: str) -> list[str]:
    return analyse_line(line).texts()


# ------------------------------------------------- 1. deletes outside the worktree

OUTSIDE_WORKTREE = [
    "rm -rf ~/important",
    "rm -rf /var/lib/../../home",
    'rm -rf "$HOME/Documents/old"',
    'rm -rf "${HOME}"/code',
    "rm -r ~/.local/share",
    "rm -rf ~alice/work",
    "rm -rf ../other-task",
    "rm -rf ../../x",
    "rm -rf build/../../src",
    "rm -rf /tmp/../etc/x",
    "rm -rf ~/.cache/../Documents",
    'rm -rf "$PWD/.."',
    "rm -rf ./build ~/work",
    "find ~/important -type f -delete",
    "find ../other-task -delete",
]
ABSOLUTE_PATHS = [
    "rm -rf /home/alice/project",
    "rm -rf /opt/app/releases",
    "rm -r -f /srv/app/current/data",
    "rm -rf ~/.cache/pip",
    "rm -rf ../other-worktree/build",
    "find /home/alice/project -name '*.o' -delete",
]
INSIDE_OR_TEMPORARY = [
    "rm -rf ./build",
    "rm -rf node_modules",
    "rm -rf dist build *.egg-info",
    "rm -rf /tmp/build-cache",
    "rm -rf /var/tmp/x",
    "rm -rf /private/var/folders/xx/T/tmp1",
    'rm -rf "$TMPDIR/x"',
    'rm -rf "$(mktemp -d)"',
    "rm -f ~/notes.txt",
    "rm ~/x.txt",
    "find /tmp -name 'pytest-*' -delete",
    'echo "rm -rf ~/important"',
]


@pytest.mark.parametrize("line", OUTSIDE_WORKTREE)
def test_recursive_delete_outside_the_worktree_is_blocked(line: str) -> None:
    assert decide(line).action == "block", rules(line)


@pytest.mark.parametrize("line", ABSOLUTE_PATHS)
def test_recursive_delete_of_an_absolute_path_or_a_cache_outside_warns(line: str) -> None:
    """Rules do not know where the worktree is, so an absolute path only warns."""
    assert decide(line).action == "warn", rules(line)


@pytest.mark.parametrize("line", INSIDE_OR_TEMPORARY)
def test_deletes_inside_the_worktree_or_in_temporary_directories_pass(line: str) -> None:
    assert decide(line).action in ("allow", "log"), rules(line)


# ------------------------------------------------- 2. abbreviated long options

ABBREVIATED = [
    "git reset --har",
    "git reset --ha HEAD~2",
    "git -C repo reset -q --hard",
    "git clean --forc -dx",
    "git clean -d --fo",
    "rm --rec -f ~",
    "rm --recursive --fo /",
    "rm --recur ~/important",
    "rm --no-pres -r /mnt/x",
    "git push --mirro",
    "git push --forc origin main",
    "git -C repo push --for",
    "git send-pack --forc origin main",
    "chmod --rec 777 /",
    "chown --recu nobody /usr",
]
ABBREVIATED_WARNINGS = [
    "git branch --del --forc feature",
    "git push origin --del old",
    "git gc --pru=now",
]
ABBREVIATED_BENIGN = [
    "git reset --soft HEAD~1",
    "git reset --kee HEAD~1",
    "git clean --dry -fd",
    "git restore --st .",
    "git push --set-up origin feature",
    "git push --force-w origin feature",
    "rm --verb -f file.txt",
    "chmod --recursive u+w ./build",
]


@pytest.mark.parametrize("line", ABBREVIATED)
def test_abbreviated_destructive_options_are_blocked(line: str) -> None:
    assert decide(line).action == "block", rules(line)


@pytest.mark.parametrize("line", ABBREVIATED_WARNINGS)
def test_abbreviated_options_meet_the_warning_rules(line: str) -> None:
    assert decide(line).action == "warn", rules(line)


@pytest.mark.parametrize("line", ABBREVIATED_BENIGN)
def test_abbreviated_harmless_options_pass(line: str) -> None:
    assert decide(line).action in ("allow", "log"), rules(line)


def test_long_options_are_written_out_and_an_ambiguous_one_reads_as_the_worst() -> None:
    assert views("git reset --har")[0] == "git reset --hard"
    assert views("rm --rec --fo x")[0] == "rm --recursive --force x"
    # git refuses `--forc` as ambiguous; read as --force, it cannot pass unnoticed
    assert views("git push --forc")[0] == "git push --force"
    assert views("git push --force-w")[0] == "git push --force-with-lease"
    # an operand after `--` is not an option
    assert views("rm -- --rec")[0] == "rm -- --rec"


# ---------------------------------------- 3. globs and expansions that reach ~ or /

EXPANSIONS = [
    "rm -rf ~/?*",
    "rm -rf ~/.[!.]*",
    "rm -rf ~/.??*",
    "rm -rf /*/*",
    "rm -rf /e*",
    "rm -rf /[a-z]*",
    'rm -rf "${HOME%/}"',
    'rm -rf "${HOME:?}"/*',
    "rm -rf $(echo ~)",
    'rm -rf "$(echo ~)"',
    "rm -rf `echo $HOME`",
    'rm -rf "$(printf %s "$HOME")"',
    "rm -rf $(echo /)",
    "rm -rf {~,/tmp/x}",
]
EXPANSIONS_BENIGN = [
    "rm -rf /tmp/foo*",
    "rm -rf ./*.egg-info",
    "ls -d ~/.[!.]*",
    "echo $(echo ~)",
    "du -sh /*",
]


@pytest.mark.parametrize("line", EXPANSIONS)
def test_globs_and_expansions_reaching_home_or_root_are_blocked(line: str) -> None:
    assert decide(line).action == "block", rules(line)


@pytest.mark.parametrize("line", EXPANSIONS_BENIGN)
def test_globs_that_stay_local_pass(line: str) -> None:
    assert decide(line).action in ("allow", "log"), rules(line)


def test_a_substitution_with_a_known_output_is_shown_as_that_output() -> None:
    assert views("rm -rf $(echo ~)") == ["echo …", "rm -rf ~"]
    assert views("rm -rf `printf '%s/x' ~`")[-1] == "rm -rf ~/x"
    assert views("rm -rf $(echo a b)")[-1] == "rm -rf a b"  # unquoted: split
    assert views('rm -rf "$(echo a b)"')[-1] == "rm -rf 'a b'"
    assert views("rm -rf $(pwd)/x")[-1] == "rm -rf $PWD/x"  # where it is, as a path
    assert views("rm -rf $(id -u)/x")[-1] == "rm -rf $(id -u)/x"  # not known


# ---------------------------------------------- 4. git configuration that runs code

GIT_CONFIG_BLOCKED = [
    "git -c alias.x='!rm -rf ~' x",
    "git -c 'alias.x=! rm -rf ~' x",
    "git -c core.sshCommand='rm -rf ~' fetch",
    "git -c core.pager='rm -rf ~' log",
    "git -c remote.origin.push=+main push",
    "git -c remote.origin.mirror=true push",
    "git -c alias.p=push p --force",
    "git -c alias.push='!true' push --force",
    "git config alias.y 'push --force' && git y",
    "git config --global alias.nuke '!rm -rf ~'",
    "git config set alias.pf 'push -f'",
    "git config remote.origin.push '+refs/heads/*:refs/heads/*'",
    "git config core.sshCommand 'sh -c \"rm -rf ~\"'",
    "GIT_SSH_COMMAND='rm -rf ~' git fetch",
    "export GIT_SSH_COMMAND='rm -rf ~'",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.x GIT_CONFIG_VALUE_0='!rm -rf ~' git x",
    "git push --receive-pack='rm -rf ~' origin",
    "git clone -u 'rm -rf ~' ./other x",
    "git send-pack --force origin main",
    "git send-pack origin +main",
    "git push --mirror origin",
    "git send-pack --mirror origin",
]
GIT_CONFIG_WARNED = [
    "git -c core.hooksPath=/tmp/hooks commit -m x",
    "git -c core.sshCommand='ssh -i ~/.ssh/deploy' fetch",
    "git config core.fsmonitor ./watch.sh",
    "git --config-env=core.sshCommand=CMD fetch",
    "git -c protocol.ext.allow=always fetch ext::x",
    "git config filter.x.smudge 'touch /tmp/planted; cat'",
    "git -c diff.external=./differ diff",
]
GIT_CONFIG_BENIGN = [
    "git -c user.name=x commit -m msg",
    "git -c color.ui=never log",
    "git -c core.pager=cat log -n 5",
    "git -c alias.st=status st",
    "git -c remote.origin.push=feature push",
    "git config user.email a@example.com",
    "git config --global alias.co checkout",
    "git config --get alias.y",
    "git config --unset alias.y",
    "git config core.fsmonitor true",
    "git config core.editor vim",
    "git config --get filter.lfs.smudge",
    "git clone --mirror https://example.com/r.git",
    'git commit -m "never git push --mirror"',
]


@pytest.mark.parametrize("line", GIT_CONFIG_BLOCKED)
def test_git_configuration_that_destroys_is_blocked(line: str) -> None:
    assert decide(line).action == "block", rules(line)


@pytest.mark.parametrize("line", GIT_CONFIG_WARNED)
def test_git_settings_that_name_a_program_warn(line: str) -> None:
    assert decide(line).action == "warn", rules(line)


@pytest.mark.parametrize("line", GIT_CONFIG_BENIGN)
def test_ordinary_git_settings_pass(line: str) -> None:
    assert decide(line).action in ("allow", "log"), rules(line)


def test_git_aliases_and_commands_in_settings_are_commands_of_their_own() -> None:
    assert "git push --force" in views("git -c alias.p=push p --force")
    assert "rm -rf ~" in views("git -c alias.x='!rm -rf ~' x")
    assert "rm -rf ~" in views("git -c core.sshCommand='rm -rf ~' fetch")
    # the value is shown masked, so the setting itself is not read as a command
    assert views("git -c core.sshCommand='rm -rf ~' fetch")[0] == "git -c core.sshCommand=… fetch"


def test_push_mirror_is_blocked_and_push_delete_warns() -> None:
    assert rules("git push --mirror backup") == {"git-push-mirror"}
    assert decide("git push --mirror backup").action == "block"
    assert rules("git push origin --delete old") == {"git-push-delete"}


# ------------------------------------------- 5. wrappers and programs that run code

WRAPPED = [
    "setsid rm -rf ~",
    "setsid -f rm -rf ~",
    "flock /tmp/lock rm -rf ~",
    "flock -w 5 /tmp/lock rm -rf ~",
    "flock /tmp/lock -c 'rm -rf ~'",
    "taskset 0x1 rm -rf /",
    "taskset -c 0 git reset --hard",
    "unshare -r rm -rf ~",
    "unshare --user --map-root-user rm -rf ~",
    "strace -f -o /dev/null rm -rf ~",
    "ltrace rm -rf /",
    "chrt 10 rm -rf /",
    "nsenter -t 1 -m rm -rf /",
    "script -qc 'rm -rf ~' /dev/null",
    "script --command 'rm -rf ~' log.txt",
    "systemd-run --user rm -rf ~",
    "systemd-run --user --unit x -p MemoryMax=1G rm -rf ~",
    "parallel rm -rf ::: ~ /",
    "parallel ::: 'git push --force'",
    "tmux new -d 'rm -rf ~'",
    "tmux new-session -d -s x bash -c 'rm -rf ~'",
    "tmux send-keys -t work 'rm -rf ~' Enter",
    "tmux run-shell 'rm -rf ~'",
    "screen -dm rm -rf ~",
    "screen -dmS x bash -c 'rm -rf ~'",
    "screen -S x -X stuff 'rm -rf ~\\n'",
    "echo 'rm -rf ~' | at now",
    "at now <<< 'git clean -fdx'",
    "batch <<< 'rm -rf ~'",
    "expect -c 'spawn rm -rf ~'",
    "echo 'spawn rm -rf ~' | expect",
    "nohup setsid nice rm -rf ~ &",
]
WRAPPED_BENIGN = [
    "setsid make",
    "flock /tmp/lock make",
    "flock 9",
    "taskset -p 1 42",
    "taskset -c 0 python bench.py",
    "unshare -r id",
    "strace -c ls",
    "strace -p 4242",
    "script -q /dev/null",
    "systemd-run --user --scope make",
    "parallel gzip ::: a.log b.log",
    "tmux ls",
    "tmux attach -t build",
    "tmux new -d -s build 'make -j8'",
    "tmux send-keys -t build 'make test' Enter",
    "screen -ls",
    "screen -r work",
    "screen -dmS server python -m http.server",
    "echo 'make test' | at now + 1 hour",
    "at -l",
    "expect -f login.exp",
]


@pytest.mark.parametrize("line", WRAPPED)
def test_commands_run_by_wrappers_and_runners_are_checked(line: str) -> None:
    assert decide(line).action == "block", rules(line)


@pytest.mark.parametrize("line", WRAPPED_BENIGN)
def test_wrappers_running_harmless_commands_pass(line: str) -> None:
    assert decide(line).action in ("allow", "log"), rules(line)


def test_wrappers_are_removed_and_kept_in_the_second_view() -> None:
    assert views("flock -x /tmp/l setsid rm -rf x") == [
        "rm -rf x",
        "flock -x /tmp/l setsid rm -rf x",
    ]
    assert views("strace -p 42") == ["strace -p 42"]  # attaches; runs nothing


def test_a_pane_command_of_several_words_runs_without_a_shell() -> None:
    # tmux runs `bash -c 'rm -rf x'` as words: the script stays one word
    assert "rm -rf x" in views("tmux new -d bash -c 'rm -rf x'")
    assert "rm -rf x" in views("tmux new -d 'rm -rf x'")


# --------------------------------------------------- 6. decoded scripts run by a shell

DECODED = [
    "echo cm0gLXJmIH4= | base64 -d | sh",
    "echo cm0gLXJmIH4= | base64 --decode | bash",
    "echo cm0gLXJmIH4= | openssl base64 -d | sh",
    "base64 -d payload.b64 | sh",
    "cat payload | base64 -d | sh",
    "base64 -d <<< cm0gLXJmIH4= | bash",
    "echo 726d202d7266207e | xxd -r -p | sh",
    "echo '~ fr- mr' | rev | sh",
    "printf '\\x72\\x6d -rf ~' | sh",
    "echo -e '\\x72\\x6d -rf ~' | sh",
    'sh -c "$(echo cm0gLXJmIH4= | base64 -d)"',
    'eval "$(base64 -d payload.b64)"',
    "bash <(echo cm0gLXJmIH4= | base64 -d)",
    "gunzip -c payload.gz | sh",
    "echo cm0gLXJmIH4= | base64 -d | python3 -",
]
DECODED_BENIGN = [
    "base64 file.txt",
    "echo aGk= | base64 -d",
    "echo aGk= | base64 -d > hello.txt",
    "base64 -d x.b64 | tar xz",
    "echo dGVzdA== | base64 -d | wc -c",
    "base64 -d cert.b64 | openssl x509 -noout -text",
    "xxd file.bin | head",
    "rev names.txt | sort",
    "zcat dump.sql.gz | psql app",
    'git commit -m "drop the base64 -d | sh trick"',
]


@pytest.mark.parametrize("line", DECODED)
def test_decoded_scripts_piped_to_a_shell_are_blocked(line: str) -> None:
    assert decide(line).action == "block", rules(line)


@pytest.mark.parametrize("line", DECODED_BENIGN)
def test_decoding_that_runs_nothing_passes(line: str) -> None:
    assert decide(line).action in ("allow", "log"), rules(line)


def test_a_decoded_script_is_analysed_as_commands() -> None:
    assert "rm -rf ~" in views("echo cm0gLXJmIH4= | base64 -d | sh")
    assert "rm -rf ~" in views("echo 726d202d7266207e | xxd -r -p | sh")
    assert "rm -rf ~" in views("echo '~ fr- mr' | rev | tee log | sh")
    assert "rm -rf ~" in views("printf '\\x72\\x6d -rf ~' | sh")
