#!/usr/bin/env bash
# Vendor the JavaScript the book's pages need, from the npm registry, into book/_vendor/.
#
#   scripts/vendor_widget_js.sh          # needs `npm` (Debian: apt-get install npm)
#
# The book shows widgets from the state stored in each notebook, with no kernel and
# no network: the pages load these local copies instead of a CDN.
#
#   requirejs                  require.js        AMD loader the widget bundle expects
#   @jupyter-widgets/html-manager  embed-amd.js  renders the stored widget state
#                                                (bundles @jupyter-widgets/base,
#                                                controls and output)
#                                                and the icon font its stylesheet
#                                                asks for (the *.woff2 next to it)
#   mathjax                    tex-svg.js        renders the lessons' maths; SVG output
#                                                needs no font files
#
# Each folder keeps the package.json (name, version, licence) or LICENSE it came with.
# The copies are committed, so `make book` and CI need neither npm nor a network.
# Run this again only to change a version; it rewrites book/_vendor/VENDORED.md
# with each file's sha256, which tests/lessons/test_book_config.py checks.
set -euo pipefail

HTML_MANAGER=1.0.15   # the html-manager release that matches ipywidgets 8.1
REQUIREJS=2.3.8
MATHJAX=3.2.2         # the 3.x line Sphinx's mathjax extension targets

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/build/npm-cache"
# book/_vendor/static is copied into the site's _static/ (see book/_config.yml). Not
# book/_static: Jupyter Book would add every .js file under it to every page.
VENDOR="$ROOT/book/_vendor"
STATIC="$VENDOR/static"
# The widget bundle asks for its icon font relative to where requirejs thinks each
# module lives; book/_js/widget-setup.js points requirejs at widget-assets/.
ASSETS="$STATIC/widget-assets/@jupyter-widgets"

command -v npm >/dev/null || { echo "npm is needed to refresh the vendored JavaScript (Debian: apt-get install npm)" >&2; exit 1; }

# npm pack downloads the published tarball of exactly this version; nothing is installed.
fetch() {  # fetch <package> <version> -> prints the folder the tarball was unpacked into
    local spec="$1@$2" folder="$CACHE/$(echo "$1" | tr '/@' '__')-$2"
    if [ ! -d "$folder/package" ]; then
        mkdir -p "$folder"
        (cd "$folder" && npm pack --silent "$spec" >/dev/null && tar xzf ./*.tgz)
    fi
    echo "$folder/package"
}

html_manager="$(fetch @jupyter-widgets/html-manager "$HTML_MANAGER")"
requirejs="$(fetch requirejs "$REQUIREJS")"
mathjax="$(fetch mathjax "$MATHJAX")"

rm -rf "$VENDOR"
mkdir -p "$STATIC/html-manager" "$STATIC/requirejs" "$STATIC/mathjax" "$ASSETS/html-manager/dist"
cp "$html_manager/dist/embed-amd.js" "$html_manager/package.json" "$STATIC/html-manager/"
cp "$requirejs/require.js" "$requirejs/package.json" "$STATIC/requirejs/"
cp "$mathjax/es5/tex-svg.js" "$mathjax/LICENSE" "$STATIC/mathjax/"
cp "$html_manager"/dist/*.woff2 "$ASSETS/html-manager/dist/"
cp "$html_manager"/dist/*.woff2 "$ASSETS/"

{
    echo "# Vendored JavaScript"
    echo
    echo "Written by scripts/vendor_widget_js.sh from the npm registry; do not edit by hand."
    echo
    echo "| package | version |"
    echo "|---|---|"
    echo "| @jupyter-widgets/html-manager | $HTML_MANAGER |"
    echo "| requirejs | $REQUIREJS |"
    echo "| mathjax | $MATHJAX |"
    echo
    echo "## sha256"
    echo
    echo '```'
    (cd "$VENDOR" && find static -type f | sort | xargs sha256sum)
    echo '```'
} > "$VENDOR/VENDORED.md"
echo "vendored into $VENDOR"
