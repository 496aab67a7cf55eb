# Guest script (busybox sh, run from the share by gluster-fsops-test.sh): holds f open and g looked up, waits while the host replaces both through the other gluster mount, then says what it sees: "ESTALE NAME PASS|FAIL what".
# shellcheck shell=dash
# $1: seconds a name may take to show the new file (default 5).
secs=${1:-5}
cd /mnt || exit 1
exec 3<f
stat g >/dev/null
echo "held: f=$(cat f) g=$(cat g)"
touch holding
i=0
while [ ! -e go ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
[ -e go ] || { echo "ESTALE go FAIL the host never said go"; exit 1; }
wrong=""
# by_name NAME: reads NAME until it gives the new content ($secs s at most: the guest's
# entry/attribute timeouts and those of the host's gluster mount are 1 s each); each other
# answer must be the old content, ESTALE or ENOENT, never other bytes or another error.
by_name() {
    local n=0 out seen=""
    while [ $n -lt $((secs * 10)) ]; do
        if out=$(cat "$1" 2>&1); then :; else out="error: $out"; fi
        case "$out" in
            new) echo "ESTALE $1-by-name PASS new content after $n tries (before: ${seen:-nothing else})"; return ;;
            old | "error: "*"Stale file handle" | "error: "*"No such file"*)
                case "$seen" in *"$out"*) ;; *) seen="${seen}[$out]" ;; esac ;;
            *) wrong="$wrong $1:[$out]" ;;
        esac
        sleep 0.1
        n=$((n + 1))
    done
    echo "ESTALE $1-by-name FAIL no new content in $secs s (saw: $seen)"
}
by_name f
by_name g
if out=$(cat <&3 2>&1); then :; else out="error: $out"; fi
case "$out" in
    old | "error: "*"Stale file handle" | "error: "*"No such file"*) echo "ESTALE f-open-fd PASS the fd opened before gives [$out]" ;;
    *) echo "ESTALE f-open-fd FAIL the fd opened before gives [$out]" ; wrong="$wrong fd:[$out]" ;;
esac
exec 3<&-
if [ -z "$wrong" ]; then echo "ESTALE never-wrong PASS"; else echo "ESTALE never-wrong FAIL$wrong"; fi
rm -f holding go
