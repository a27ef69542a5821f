#!/usr/bin/env bash
# packaging/third_party.sh DIR — the position-independent static archives the release bundle links
# (`make dist-deps`, run once; needs the network), built from Debian's own source packages of the
# -dev packages this machine compiles against, and the Debian packages of the bundle tests' minimal root.
#
# Why from source: Debian 12's libunwind.a (R_X86_64_32), libdw.a and libelf.a (R_X86_64_TPOFF32) are
# not position-independent and cannot be linked into a shared object, and libsimdjson-dev ships no
# archive at all. Linked statically with hidden symbols (packaging/module.mk), none of them can
# collide with the copy a traced program loads itself; a private shared copy could (ld.so puts a
# preloaded library's dependencies in the global scope, where the program's own lookups find them).
# libzstd.a and libz.a come from Debian as they are: the members the recorder and the analyzer use
# link into a shared object once their symbols are local (checked by the link itself, -z defs).
#
# Writes (nothing outside DIR; the system's apt configuration is not touched):
#   DIR/pic/lib/{libunwind,libdw,libelf,libsimdjson}.a   DIR/pic/VERSIONS (source package=version)
#   DIR/pic/licenses/<source package>.copyright           DIR/root-debs/*.deb (libc6, libgcc-s1, libstdc++6)
# Exit status: 0 done (or already done), 1 a step failed (its log is named on stderr).
set -euo pipefail

dir=${1:?usage: packaging/third_party.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
pic=$dir/pic
jobs=${JOBS:-2}

if [ -f "$pic/.built" ] && [ -n "$(ls "$dir"/root-debs/*.deb 2>/dev/null)" ]; then
  exit 0
fi

log=$dir/log
mkdir -p "$log"
step() {  # step NAME CMD...: runs CMD with its output in $log/NAME.log; on failure, says where to look
  local name=$1
  shift
  if ! "$@" >"$log/$name.log" 2>&1; then
    echo "packaging/third_party.sh: $name failed (log: $log/$name.log):" >&2
    tail -n 15 "$log/$name.log" >&2
    exit 1
  fi
}

# --- a private apt configuration (sources and lists under DIR) for `apt-get source` / `download` ---
apt=$dir/apt
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
cat >"$apt/sources.list" <<EOF
deb-src [signed-by=$keyring] http://deb.debian.org/debian $suite main
deb-src [signed-by=$keyring] http://deb.debian.org/debian $suite-updates main
deb-src [signed-by=$keyring] http://deb.debian.org/debian-security $suite-security main
EOF
apt_opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o APT::Sandbox::User=root)

# The source package and version of each -dev package we compile against: the archives then match
# the headers in /usr/include exactly.
source_of() { dpkg-query -W -f='${source:Package}=${source:Version}' "$1"; }
sources=("$(source_of libunwind-dev)" "$(source_of libdw-dev)" "$(source_of libsimdjson-dev)")

src=$dir/src
if [ ! -f "$src/.fetched" ]; then
  step apt-update apt-get "${apt_opts[@]}" update
  rm -rf "$src" && mkdir -p "$src"
  fetch() { (cd "$src" && apt-get "${apt_opts[@]}" source --download-only --only-source "$1"); }
  for s in "${sources[@]}"; do
    # The exact version first; where the archive moved on (a point release), the one it has now.
    fetch "$s" >>"$log/apt-source.log" 2>&1 || step "apt-source-${s%%=*}" fetch "${s%%=*}"
  done
  printf '%s\n' "${sources[@]}" >"$src/VERSIONS"
  touch "$src/.fetched"
fi

# --- the minimal root of tests/dist: glibc, and the C++ runtime of the test programs (not ours) ---
debs=$dir/root-debs
if [ -z "$(ls "$debs"/*.deb 2>/dev/null)" ]; then
  mkdir -p "$debs.partial"
  step apt-download sh -c "cd '$debs.partial' && apt-get download libc6 libgcc-s1 libstdc++6"
  rm -rf "$debs" && mv "$debs.partial" "$debs"
fi

[ -f "$pic/.built" ] && exit 0
rm -rf "$pic" "$dir/work"
mkdir -p "$pic/lib" "$pic/licenses" "$dir/work"
unpack() {  # unpack SOURCE-PACKAGE: dpkg-source -x (Debian's patches applied) into work/SOURCE-PACKAGE
  local dsc
  dsc=$(ls "$src/$1"_*.dsc | head -n 1)
  step "unpack-$1" dpkg-source --no-check -x "$dsc" "$dir/work/$1"
  cp "$dir/work/$1/debian/copyright" "$pic/licenses/$1.copyright"
}
flags="-O2 -g -fPIC"

# libunwind: local unwinding only; no C++ exception ABI of its own (_Unwind_*: libgcc's stays in
# charge), no compressed .gnu_debugdata (no liblzma).
unpack libunwind
(
  cd "$dir/work/libunwind"
  step libunwind-configure ./configure --prefix="$dir/work/libunwind-install" --enable-static --disable-shared \
    --with-pic CFLAGS="$flags" --disable-minidebuginfo --disable-zlibdebuginfo --disable-tests \
    --disable-documentation --disable-coredump --disable-ptrace --disable-setjmp --disable-cxx-exceptions
  step libunwind-make make -j"$jobs" -C src
)
cp "$dir/work/libunwind/src/.libs/libunwind.a" "$pic/lib/"

# elfutils: libelf and libdw (with libdwfl, libebl, the backends and libcpu inside libdw.a, as
# Debian's). zlib kept (compressed debug sections); no debuginfod, bzip2, xz or zstd files.
unpack elfutils
(
  cd "$dir/work/elfutils"
  step elfutils-configure ./configure --prefix=/usr CFLAGS="$flags" --disable-debuginfod --disable-libdebuginfod \
    --without-bzlib --without-lzma --without-zstd --disable-nls
  for sub in lib libelf libebl backends libcpu libdwelf libdwfl libdw; do
    step "elfutils-make-$sub" make -j"$jobs" -C "$sub"
  done
)
cp "$dir/work/elfutils/libdw/libdw.a" "$dir/work/elfutils/libelf/libelf.a" "$pic/lib/"

# simdjson: its amalgamated source, compiled as the project compiles its own code.
unpack simdjson
step simdjson-compile "${CXX:-g++}" -std=c++17 $flags -c "$dir/work/simdjson/singleheader/simdjson.cpp" \
  -o "$dir/work/simdjson.o"
ar rcs "$pic/lib/libsimdjson.a" "$dir/work/simdjson.o"

# Debian's libzstd.a and libz.a are linked as they are; their licenses go into the bundle too.
cp /usr/share/doc/libzstd-dev/copyright "$pic/licenses/libzstd.copyright"
cp /usr/share/doc/zlib1g-dev/copyright "$pic/licenses/zlib.copyright"
{ cat "$src/VERSIONS"; source_of libzstd-dev; echo; source_of zlib1g-dev; echo; } >"$pic/VERSIONS"
rm -rf "$dir/work"
touch "$pic/.built"
echo "packaging/third_party.sh: PIC archives in $pic/lib ($(tr '\n' ' ' <"$pic/VERSIONS"))"
