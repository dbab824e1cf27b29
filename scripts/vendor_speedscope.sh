#!/usr/bin/env bash
# Vendor speedscope (the trace viewer tg.widgets.ProfileView embeds) from the npm registry
# into widgets/vendor/speedscope/.
#
#   scripts/vendor_speedscope.sh          # needs `npm` (Debian: apt-get install npm)
#
# speedscope (MIT, https://github.com/jlfwong/speedscope) reads Chrome's Trace Event Format,
# which is what tg.profiler exports. Its release folder is a static page: index.html, one
# script, one stylesheet and one font. ProfileView inlines them into a self-contained page,
# so the viewer needs no server and no network, in JupyterLab and in the built book.
# Left out: the JFR importer's WebAssembly and the sample profile (not needed for traces).
# The copy is committed; run this again only to change the version. It rewrites
# widgets/vendor/speedscope/VENDORED.md with each file's sha256, which a test checks.
set -euo pipefail

SPEEDSCOPE=1.25.0

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/build/npm-cache"
VENDOR="$ROOT/widgets/vendor/speedscope"

command -v npm >/dev/null || { echo "npm is needed to refresh the vendored speedscope (Debian: apt-get install npm)" >&2; exit 1; }

folder="$CACHE/speedscope-$SPEEDSCOPE"
if [ ! -d "$folder/package" ]; then
    mkdir -p "$folder"
    (cd "$folder" && npm pack --silent "speedscope@$SPEEDSCOPE" >/dev/null && tar xzf ./*.tgz)
fi
release="$folder/package/dist/release"

rm -rf "$VENDOR"
mkdir -p "$VENDOR"
cp "$release/index.html" "$release"/speedscope-*.js "$release"/speedscope-*.css \
   "$release"/SourceCodePro-Regular*.woff2 "$release/source-code-pro.LICENSE.md" \
   "$folder/package/LICENSE" "$folder/package/package.json" "$VENDOR/"

{
    echo "# Vendored speedscope"
    echo
    echo "Written by scripts/vendor_speedscope.sh from the npm registry; do not edit by hand."
    echo
    echo "| package | version | licence |"
    echo "|---|---|---|"
    echo "| speedscope | $SPEEDSCOPE | MIT (LICENSE); its font Source Code Pro: SIL OFL 1.1 |"
    echo
    echo "## sha256"
    echo
    echo '```'
    (cd "$VENDOR" && find . -type f ! -name VENDORED.md | sort | xargs sha256sum)
    echo '```'
} > "$VENDOR/VENDORED.md"
echo "vendored into $VENDOR"
