#!/usr/bin/env bash
# System packages some test suites drive for real: tmux (a real terminal for the live
# console), redis-server (the collections benchmark peer), openssh-server and iproute2
# (SSH test hosts in network namespaces), s3fs and fuse (volume mount tests), chromium (the
# dashboard's browser test, driven headless by Playwright: tests/e2e/test_dashboard_browser.py;
# Debian's package, as Playwright's own browser download needs the internet), procps
# (scripts/test.sh's pkill, and the `uptime` of examples/observe_events.py). Installs only
# what is missing; needs root+apt. Outside CI a missing one is a note (its tests skip);
# in CI (CI=true) it is an error, as are no root (test hosts, the second account) and no
# /dev/fuse: a suite that skips a third of itself must not pass.
set -euo pipefail
ci=false
case "${CI:-}" in true | 1) ci=true ;; esac
fail() {
  echo "error: $*" >&2
  exit 1
}
if $ci && [ "$(id -u)" != 0 ]; then
  fail "the suite needs root in CI (network-namespace test hosts, a second account for the security tests)"
fi
need=()
command -v tmux >/dev/null || need+=(tmux)
command -v redis-server >/dev/null || need+=(redis-server)
command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ip >/dev/null || need+=(iproute2)
command -v pkill >/dev/null && command -v uptime >/dev/null || need+=(procps)
command -v s3fs >/dev/null || need+=(s3fs)
command -v fusermount >/dev/null || command -v fusermount3 >/dev/null || need+=(fuse3)
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || need+=(chromium)
for tool in setpriv useradd unshare; do
  command -v "$tool" >/dev/null || need+=("$([ "$tool" = useradd ] && echo passwd || echo util-linux)")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  elif $ci; then
    fail "missing ${need[*]} and no root with apt-get to install them"
  else
    echo "note: missing ${need[*]}; the tests that need them will be skipped" >&2
  fi
fi
if $ci && [ ! -e /dev/fuse ]; then
  fail "no /dev/fuse: the volume mount tests need it in CI"
fi
mkdir -p /run/sshd 2>/dev/null || true
