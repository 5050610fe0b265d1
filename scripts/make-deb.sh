#!/usr/bin/env bash
# `make deb`: adplayerd_<version>_<arch>.deb from the release build, in the repository's folder.
#
# Made with dpkg-deb from a staged tree (not dpkg-buildpackage + debhelper): the build needs a
# Swift toolchain, which no Debian package provides, so a source package could not declare its
# Build-Depends; the tree is what `make install` stages (DESTDIR, PREFIX=/usr), plus what a
# package adds — debian/ holds the maintainer scripts, sysusers.d and tmpfiles.d entries and
# the copyright. Debian's own tools do the rest: dpkg-shlibdeps computes Depends from the
# binaries, dpkg-deb builds, lintian checks (the tests run it). The version is the one
# `adplayerd --version` prints (Bounds/Product.swift), and nowhere else.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
release=.build/release
version=$("$release/adplayerd" --version | awk '{print $2}')
[[ "$version" =~ ^[0-9][0-9A-Za-z.+~]*$ ]] || { echo "make-deb: adplayerd --version says \"$version\"" >&2; exit 1; }
arch=$(dpkg --print-architecture)
package=adplayerd_${version}_${arch}
work=.build/deb
stage=$work/$package
rm -rf "$work" && mkdir -p "$stage/DEBIAN"

# What `make install` installs, at Debian's places: programs in /usr/bin, the system units in
# /lib/systemd/system (bookworm's place for a package's units), the user units in
# /usr/lib/systemd/user, the man pages, the completion and the docs under /usr/share.
make --no-print-directory install-files DESTDIR="$root/$stage" PREFIX=/usr \
  SYSTEM_UNIT_DIR=/lib/systemd/system USER_UNIT_DIR=/usr/lib/systemd/user >/dev/null

# Binaries as Debian ships them: symbols and notes stripped (dh_strip's options).
for program in adplayerd adplayerctl adplayerd-web adplayerd-mqtt; do
  strip --remove-section=.comment --remove-section=.note --strip-unneeded "$stage/usr/bin/$program"
done

# The adplayerd user and group, and the state and cache folders, made by systemd's own
# tools at configure time (no useradd by hand).
install -D -m 0644 debian/adplayerd.sysusers "$stage/usr/lib/sysusers.d/adplayerd.conf"
install -D -m 0644 debian/adplayerd.tmpfiles "$stage/usr/lib/tmpfiles.d/adplayerd.conf"

# Debian's documentation rules: copyright, a compressed changelog, man pages compressed (the docs
# stay plain: the units' Documentation= points at them).
doc=$stage/usr/share/doc/adplayerd
install -m 0644 debian/copyright "$doc/copyright"
date=$(date -R -d "@${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")
printf 'adplayerd (%s) unstable; urgency=medium\n\n  * Release %s (README.md, docs/).\n\n -- adplayerd developers <adplayerd@lists.adplayerd.org>  %s\n' \
  "$version" "$version" "$date" | gzip -9n > "$doc/changelog.gz"
find "$stage/usr/share/man" -type f -exec gzip -9n {} +

# Maintainer scripts and the conffile.
for script in postinst prerm postrm; do install -m 0755 "debian/$script" "$stage/DEBIAN/$script"; done
echo /etc/adplayerd.conf > "$stage/DEBIAN/conffiles"

# Depends from the binaries (dpkg-shlibdeps reads debian/control for the package's name).
shlibs=$(cd "$work" && mkdir -p debian && printf 'Source: adplayerd\n\nPackage: adplayerd\nArchitecture: any\n' > debian/control \
  && dpkg-shlibdeps -O "${package}/usr/bin/adplayerd" "${package}/usr/bin/adplayerctl" "${package}/usr/bin/adplayerd-web" \
       "${package}/usr/bin/adplayerd-mqtt" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { echo "make-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -print0 | sort -z | xargs -0 md5sum | sed 's| \./| |') > "$stage/DEBIAN/md5sums"
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" -e "s/@DEPENDS@/$shlibs/" debian/control.in > "$stage/DEBIAN/control"

dpkg-deb --root-owner-group -Zxz --build "$stage" "$package.deb" >/dev/null
echo "$package.deb: $(stat -c %s "$package.deb") bytes (Depends: $shlibs)"
