#!/usr/bin/env bash
# Drives the current directory with ordinary tools and prints what they
# report, so a run on a vfscale mount can be compared with one on tmpfs.
# Output is made independent of the directory and of timestamps; directory
# sizes are left out (tmpfs counts bytes of entries, vfscale reports 0).
set -u
export LC_ALL=C
run() {
    echo "\$ $*"
    "$@" 2>&1 | sed "s|$PWD|DIR|g"
    echo "rc=${PIPESTATUS[0]}"
}
# `..` of the top directory lies outside the tree under test.
listing() {
    ls -la --time-style=+ "$@" | awk 'NR > 1 && $NF != ".." && $1 !~ /^d/ { print $1, $2, $3, $4, $5, $NF }
        NR > 1 && $NF != ".." && $1 ~ /^d/ { print $1, $2, $3, $4, $NF }'
}
types() { stat -c '%n %F %s %h %a %u %g' "$@"; }
# Waits until `[ "$@" ]` holds, or a minute (a hang guard) has passed.
until_true() {
    local _
    for _ in $(seq 6000); do
        [ "$@" ] && return 0
        sleep 0.01
    done
    echo "never: [ $* ]"
    return 1
}
# A holder takes a flock of lockf (with the options given), says so by
# creating `held`, and keeps it until let_go, so what the other lockers
# see does not depend on timing.
hold() {
    mkfifo go
    flock "$@" lockf -c "touch held; cat go > /dev/null" &
    until_true -e held
}
let_go() {
    [ -e held ] && echo > go
    wait
    rm -f held go
}
# Waits until /proc/locks shows a process blocked on a flock of file $1.
blocked_on() {
    local id _
    id=$(python3 -c 'import os, sys; s = os.stat(sys.argv[1]); print("%02x:%02x:%d" % (os.major(s.st_dev), os.minor(s.st_dev), s.st_ino))' "$1")
    for _ in $(seq 6000); do
        grep -q -- "-> FLOCK .* $id " /proc/locks && return 0
        sleep 0.01
    done
    echo "never blocked on $1"
    return 1
}
# flock(1): the second locker must fail while the first holds the lock.
second_locker_fails() {
    hold -n
    flock -n lockf -c true
    echo second=$?
    let_go
    flock -n lockf -c true
    echo after=$?
}
# A blocking flock waits for the holder: it gets the lock only once the
# holder has let go, after it was seen blocked.
blocking_flock_waits() {
    hold
    timeout 60 flock lockf -c "echo waited" &
    blocked_on lockf
    echo letting go
    let_go
}
# Shared flocks coexist.
shared_flocks_coexist() {
    hold -s
    flock -n -s lockf -c "echo shared"
    let_go
}

run mkdir -p a/b/c
run mkdir a
run sh -c 'echo hello > a/b/c/file'
run cat a/b/c/file
run cp a/b/c/file a/copy
run cmp a/b/c/file a/copy
run mv a/copy a/b/moved
run ls a a/b
run ln -s b/c/file a/link
run cat a/link
run readlink a/link
run ln a/b/moved a/hard
run types a/b/moved a/hard a/link a/b/c/file
run stat -c '%n %h' a a/b a/b/c
run sh -c 'find . | sort'
run listing a
run rm a/b/c/file
run cat a/link
run cat a/missing
run rmdir a/b
run rm a/b
run sh -c 'echo x >> a/app; echo y >> a/app; cat a/app'
run truncate -s 3 a/app
run wc -c a/app
run chmod 600 a/app
run touch -d @1000000000 a/app
run stat -c '%n %a %Y %s' a/app
run mkdir d1 d2
run touch d1/x
run mv d1/x d2/
run mv d1 d2/
run sh -c 'echo 1 > p; echo 2 > q; mv p q; cat q; ls p'
run sh -c 'seq 1 200000 > big; cp big big2; cmp big big2 && wc -c big2 && md5sum < big2'
run dd if=big of=part bs=1000 skip=5 count=3 status=none
run md5sum part
run sh -c 'ln -s loop loop; cat loop'
run touch "$(printf 'x%.0s' {1..256})"
run mv d2 d2/d1/inside
run sh -c 'find . -type f | sort'
# Sparse files: a byte past 3 GiB, holes, fallocate's modes, SEEK_DATA.
run dd if=/dev/zero of=sparse bs=1 count=1 seek=3G status=none
run stat -c '%n %s %b' sparse
run sh -c 'printf x | dd of=sparse bs=1 seek=8192 conv=notrunc status=none; od -An -c -j 8190 -N 4 sparse'
run python3 -c 'import os; fd = os.open("sparse", os.O_RDONLY); print(os.lseek(fd, 0, os.SEEK_DATA), os.lseek(fd, 8192, os.SEEK_HOLE), os.lseek(fd, 12288, os.SEEK_DATA))'
run fallocate -l 10000 fa
run stat -c '%n %s %b' fa
run fallocate -n -o 10000 -l 8192 fa
run python3 -c 'import os; fd = os.open("fa", os.O_RDONLY); print(os.lseek(fd, 0, os.SEEK_HOLE))'
run stat -c '%n %s %b' fa
run fallocate -p -o 0 -l 8192 fa
run stat -c '%n %s %b' fa
run truncate -s 1 fa
run stat -c '%n %s %b' fa
run fallocate -z -l 1 fa
run rm sparse fa
# Extended attributes (setfattr and getfattr come with the attr package).
run touch x1
run setfattr -n user.color -v blue x1
run setfattr -n trusted.note -v secret x1
run setfattr -n user.color -v red --raw x1
run getfattr -d -m - --absolute-names x1
run getfattr -n user.missing x1
run setfattr -n os2.name -v x x1
run setfattr -x user.color x1
run setfattr -x user.color x1
run setfattr -n user.color -v green x1
run cp -a --preserve=xattr x1 x2
run getfattr -d -m - x2
run python3 -c 'import os; os.setxattr("x1", "user.a", b"1", os.XATTR_CREATE)
try: os.setxattr("x1", "user.a", b"1", os.XATTR_CREATE)
except OSError as e: print(e.errno)
try: os.setxattr("x1", "user.b", b"1", os.XATTR_REPLACE)
except OSError as e: print(e.errno)
try: os.setxattr("x1", "user.big", b"x" * 65537)
except OSError as e: print(e.errno)
os.setxattr("x1", "user.big", b"x" * 65536); print(len(os.getxattr("x1", "user.big")))
print(sorted(os.listxattr("x1")))'
run mkfifo xf
run setfattr -n user.a -v 1 xf
run rm x1 x2 xf
# Special files: the VFS keeps the node, the kernel does the I/O.
run mkfifo fifo
run python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.bind("sock"); s.listen(); c = socket.socket(socket.AF_UNIX); c.connect("sock"); c.send(b"ping"); print(s.accept()[0].recv(4))'
run mknod chr c 1 3
run mknod blk b 8 1
run stat -c '%n %F %t:%T %a %s %b' fifo sock chr blk
run sh -c 'echo through > fifo & cat fifo; wait'
run python3 -c 'import os
try: os.open("fifo", os.O_WRONLY | os.O_NONBLOCK)
except OSError as e: print(e.errno)'
run sh -c 'head -c 5 chr | od -An -c'
run rm fifo sock chr blk
run rm -r a d2
run sh -c 'find . | sort'
run second_locker_fails
# fcntl POSIX locks across two processes.
run python3 - <<'EOF'
import fcntl, os, subprocess, sys
probe = """
import fcntl, os
fd = os.open('plock', os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 0)
    print('got it')
except OSError as e:
    print('conflict', e.errno)
"""
fd = os.open('plock', os.O_RDWR | os.O_CREAT, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX, 5, 0)
print(subprocess.run([sys.executable, '-c', probe], capture_output=True, text=True).stdout.strip())
fcntl.lockf(fd, fcntl.LOCK_UN, 5, 0)
print(subprocess.run([sys.executable, '-c', probe], capture_output=True, text=True).stdout.strip())
EOF
# F_GETLK names the holder; F_SETLKW waits for it, and the wait is granted
# when the holder unlocks.
run python3 - <<'EOF'
import fcntl, os, struct, subprocess, sys, time
fd = os.open('plock2', os.O_RDWR | os.O_CREAT, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX, 5, 2)
probe = """
import fcntl, os, struct, sys
fd = os.open('plock2', os.O_RDWR)
arg = struct.pack('hhqqi4x', fcntl.F_WRLCK, 0, 0, 0, 0)
t, w, s, l, pid = struct.unpack('hhqqi4x', fcntl.fcntl(fd, fcntl.F_GETLK, arg))
print('getlk', t == fcntl.F_WRLCK, w, s, l, pid == int(sys.argv[1]), flush=True)
fcntl.lockf(fd, fcntl.LOCK_EX, 1, 3)
print('waited')
"""
child = subprocess.Popen([sys.executable, '-c', probe, str(os.getpid())], stdout=subprocess.PIPE, text=True)
getlk = child.stdout.readline().strip()
time.sleep(0.5)
print('child blocked', child.poll() is None)
fcntl.lockf(fd, fcntl.LOCK_UN, 5, 2)
print(getlk)
print(child.communicate(timeout=60)[0].strip())
EOF
run blocking_flock_waits
run shared_flocks_coexist
# flock and fcntl locks are independent, F_GETLK sees only record locks,
# flock converts, OFD locks belong to their open file, and a signal ends a
# blocked F_SETLKW with EINTR -- all across processes.
run timeout 60 python3 - <<'EOF'
import errno, fcntl, os, signal, struct, subprocess, sys, time
F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW = 36, 37, 38
def flk(t, start=0, length=0):
    return struct.pack('hhqqi4x', t, 0, start, length, 0)
def getlk(fd, cmd=fcntl.F_GETLK, t=fcntl.F_WRLCK, start=0, length=0):
    t, _, s, l, _ = struct.unpack('hhqqi4x', fcntl.fcntl(fd, cmd, flk(t, start, length)))
    return {fcntl.F_UNLCK: 'unlocked', fcntl.F_RDLCK: 'read', fcntl.F_WRLCK: 'write'}[t], s, l
def child(code):
    return subprocess.Popen([sys.executable, '-c', 'import fcntl, os, sys\n' + code],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def attempt(f):
    try:
        f()
        return 'ok'
    except OSError as e:
        return errno.errorcode[e.errno]
open('locks', 'w').close()
# Another process holds flock LOCK_EX: record locks and F_GETLK ignore it.
holder = child("fd = os.open('locks', os.O_RDWR); fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()")
holder.stdout.readline()
fd = os.open('locks', os.O_RDWR)
print('getlk beside flock:', getlk(fd))
print('flock and fcntl independent:', attempt(lambda: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)) == 'ok',
      attempt(lambda: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)) == 'EAGAIN')
holder.stdin.close(); holder.wait()
fcntl.lockf(fd, fcntl.LOCK_UN)
# flock upgrades and downgrades.
a, b = os.open('locks', os.O_RDWR), os.open('locks', os.O_RDWR)
fcntl.flock(a, fcntl.LOCK_SH); fcntl.flock(b, fcntl.LOCK_SH | fcntl.LOCK_NB)
print('upgrade while shared:', attempt(lambda: fcntl.flock(a, fcntl.LOCK_EX | fcntl.LOCK_NB)))
fcntl.flock(b, fcntl.LOCK_UN)
print('upgrade alone:', attempt(lambda: fcntl.flock(a, fcntl.LOCK_EX | fcntl.LOCK_NB)))
print('shared beside exclusive:', attempt(lambda: fcntl.flock(b, fcntl.LOCK_SH | fcntl.LOCK_NB)))
fcntl.flock(a, fcntl.LOCK_SH)
print('shared after downgrade:', attempt(lambda: fcntl.flock(b, fcntl.LOCK_SH | fcntl.LOCK_NB)))
fcntl.flock(a, fcntl.LOCK_UN); fcntl.flock(b, fcntl.LOCK_UN)
# OFD locks: two open files of one process conflict; F_OFD_GETLK names the range.
print('ofd a:', attempt(lambda: fcntl.fcntl(a, F_OFD_SETLK, flk(fcntl.F_WRLCK, 10, 5))))
print('ofd b:', attempt(lambda: fcntl.fcntl(b, F_OFD_SETLK, flk(fcntl.F_WRLCK, 12, 1))))
print('ofd getlk:', getlk(b, F_OFD_GETLK, fcntl.F_RDLCK, 0, 100))
print('posix same process:', attempt(lambda: fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, 11)))
os.close(a)
print('ofd after close:', attempt(lambda: fcntl.fcntl(b, F_OFD_SETLK, flk(fcntl.F_WRLCK, 12, 1))))
os.close(b)
# A blocked F_SETLKW ends with EINTR when a signal interrupts it.
holder = child("fd = os.open('locks', os.O_RDWR); fcntl.lockf(fd, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()")
holder.stdout.readline()
def alarm(signum, frame):
    raise InterruptedError(errno.EINTR, 'interrupted')
signal.signal(signal.SIGALRM, alarm)
def interrupted_lock():
    # Armed here, so that however late it fires, it fires inside attempt.
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
print('setlkw interrupted:', attempt(interrupted_lock))
print('getlk after:', getlk(fd)[0])
holder.stdin.close(); holder.wait()
print('setlkw after holder left:', attempt(lambda: fcntl.lockf(fd, fcntl.LOCK_EX)))
os.close(fd)
EOF
run rm lockf plock plock2 locks
run listing .
