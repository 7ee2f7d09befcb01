#!/usr/bin/env bash
# System packages some test suites drive for real: tmux (a real terminal for the live
# console), redis-server (the collections benchmark peer), openssh-server and iproute2
# (SSH test hosts in network namespaces), s3fs and fuse (volume mount tests). Installs only
# what is missing; needs root+apt.
set -euo pipefail
need=()
command -v tmux >/dev/null || need+=(tmux)
command -v redis-server >/dev/null || need+=(redis-server)
command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ip >/dev/null || need+=(iproute2)
command -v s3fs >/dev/null || need+=(s3fs)
command -v fusermount >/dev/null || command -v fusermount3 >/dev/null || need+=(fuse3)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "note: missing ${need[*]}; the tests that need them will be skipped" >&2
  fi
fi
mkdir -p /run/sshd 2>/dev/null || true
