#!/usr/bin/env bash
# Run on the development machine (Debian 12) before sending the tree to a GPU host that has
# CUDA, Python and OpenBLAS but cannot install packages (the `device` tool's H200 machines):
# fills .devdeps/ (git-ignored; pass it as a carried path) with
#   sysdeps.tar.xz  Debian's PCRE2, ICU, cpp-httplib and what its headers include (OpenSSL,
#                   zlib, brotli): headers, libraries and pkg-config files, prefix /tmp/sysdeps
#   googletest/     GoogleTest's sources (Debian's googletest package), built with the tests
#   fortunes/       Debian's fortune cookies, the corpus of `nuvec-lm train`
# scripts/device/env.sh unpacks and uses them on the GPU host.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$PWD/.devdeps
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 \
  libicu-dev libicu72 libcpp-httplib-dev libcpp-httplib0.11 libssl-dev libssl3 libbrotli-dev libbrotli1 \
  zlib1g-dev >/dev/null)
mkdir "$work/root"
for d in "$work"/*.deb; do dpkg -x "$d" "$work/root"; done
cd "$work/root/usr"
rm -rf share bin sbin
find . -name "*.a" -delete
sed -i 's#^prefix *= */usr$#prefix=/tmp/sysdeps#' lib/x86_64-linux-gnu/pkgconfig/*.pc
tar cJf "$out/sysdeps.tar.xz" .
cd - >/dev/null
rm -rf "$out/googletest" "$out/fortunes"
cp -r /usr/src/googletest "$out/googletest"
# The cookie files themselves: not the .dat indexes, not the .u8 links (a copy that followed
# them would hold every file twice).
mkdir -p "$out/fortunes"
find /usr/share/games/fortunes -maxdepth 1 -type f ! -name "*.dat" -exec cp {} "$out/fortunes/" \;
du -sh "$out"
