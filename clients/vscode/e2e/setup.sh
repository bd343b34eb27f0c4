#!/usr/bin/env bash
# Installs what the real-VS-Code end-to-end test (tests/vscode) needs, idempotently:
#   Debian's Chromium (driven by Playwright), ripgrep, and the build tools for code-server's
#   native modules; code-server 4.100.3 (the real VS Code 1.100.3 workbench, the newest that
#   runs on node 20) from npm into ${TALOS_E2E_DIR:-$HOME/.cache/talos-e2e}/code-server.
# VS Code itself cannot be downloaded here; code-server from npm can, with the install scripts
# that would download prebuilt binaries turned off and the native modules built from source.
# Work already done is skipped: a finished install is recognised by its native modules
# (checked file by file, since several build steps fail harmlessly and exit codes lie).
# Usage: clients/vscode/e2e/setup.sh   (as root for apt-get, or with the apt packages present)
set -euo pipefail

VERSION=4.100.3
E2E_DIR=${TALOS_E2E_DIR:-$HOME/.cache/talos-e2e}
P=$E2E_DIR/code-server
CS=$P/node_modules/code-server
VS=$CS/lib/vscode
APT_PACKAGES=(chromium ripgrep libkrb5-dev build-essential pkg-config)

started=$SECONDS
say() { printf 'e2e setup: %s\n' "$*"; }
die() { printf 'e2e setup: FAILED: %s\n' "$*" >&2; exit 1; }

# The native modules code-server needs at run time; all present == installed.
NATIVE=(
    "$P/node_modules/argon2/lib/binding/napi-v3/argon2.node|$P/node_modules/argon2/build/Release/argon2.node"
    "$VS/node_modules/kerberos/build/Release/kerberos.node"
    "$VS/node_modules/native-watchdog/build/Release/watchdog.node"
    "$VS/node_modules/node-pty/build/Release/pty.node"
    "$VS/node_modules/@parcel/watcher/build/Release/watcher.node|$VS/node_modules/@parcel/watcher-linux-x64-glibc/watcher.node"
    "$VS/node_modules/@vscode/spdlog/build/Release/spdlog.node"
)
# each entry: alternatives separated by |; prints the missing ones
missing_native() {
    local entry alt found
    for entry in "${NATIVE[@]}"; do
        found=
        IFS='|' read -ra alts <<<"$entry"
        for alt in "${alts[@]}"; do [[ -f $alt ]] && found=1; done
        [[ -n $found ]] || echo "${alts[0]}"
    done
}

mkdir -p "$E2E_DIR"
command -v node >/dev/null && command -v npm >/dev/null || die "needs node (20) and npm"

# node-gyp builds against the headers that come with node (package nodejs: /usr/include/node);
# without nodedir it would download them, and there is no network for that.
node_include=$(dirname "$(dirname "$(command -v node)")")/include/node
if [[ -z ${npm_config_nodedir:-} && -f $node_include/node.h ]]; then
    export npm_config_nodedir=${node_include%/include/node}
fi
[[ -n ${npm_config_nodedir:-} || -n $(npm config get nodedir 2>/dev/null | grep -v '^undefined$') ]] ||
    die "no node headers ($node_include/node.h) for building code-server's native modules"

# 1. apt packages
need=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
done
if ((${#need[@]})); then
    command -v apt-get >/dev/null || die "no apt-get; install ${need[*]} by hand"
    say "apt-get install ${need[*]} (Chromium takes about 80 s)"
    t=$SECONDS
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${need[@]}"; } >"$E2E_DIR/apt.log" 2>&1 ||
        { tail -20 "$E2E_DIR/apt.log" >&2; die "apt-get install ${need[*]}"; }
    say "apt packages installed in $((SECONDS - t)) s"
else
    say "apt packages present: ${APT_PACKAGES[*]}"
fi
[[ -x /usr/bin/chromium ]] || die "/usr/bin/chromium missing after installing chromium"
command -v rg >/dev/null || die "rg missing after installing ripgrep"

# 2. code-server
installed_version() { node -p "require('$CS/package.json').version" 2>/dev/null || true; }
if [[ $(installed_version) == "$VERSION" && -z $(missing_native) && -x $VS/node_modules/@vscode/ripgrep/bin/rg && -d $VS/extensions/node_modules ]]; then
    say "code-server $VERSION already installed in $P"
else
    log=$E2E_DIR/code-server-install.log
    : >"$log"
    run() { "$@" >>"$log" 2>&1; }
    say "installing code-server $VERSION into $P (about 1-2 min; log: $log)"
    t=$SECONDS
    if [[ $(installed_version) != "$VERSION" ]]; then
        rm -rf "$P"
        mkdir -p "$P"
        run npm install --prefix "$P" --ignore-scripts --no-audit --no-fund "code-server@$VERSION" ||
            { tail -20 "$log" >&2; die "npm install code-server@$VERSION"; }
    fi
    (cd "$P" && run npm rebuild argon2) || true # prebuilt download fails; builds from source
    cd "$VS"
    run npm install --omit=dev --ignore-scripts --no-audit --no-fund ||
        { tail -20 "$log" >&2; die "npm install in lib/vscode"; }
    mkdir -p node_modules/@vscode/ripgrep/bin
    cp "$(command -v rg)" node_modules/@vscode/ripgrep/bin/rg
    # node-pty's own post-step fails with "npx canceled"; harmless when pty.node is built
    run npm rebuild kerberos native-watchdog node-pty @parcel/watcher @vscode/deviceid @vscode/spdlog || true
    ln -sfn node_modules node_modules.asar
    (cd bin/remote-cli && ln -sfn code-linux.sh code-server)
    (cd bin/helpers && ln -sfn browser-linux.sh browser.sh)
    (cd extensions && run npm install --omit=dev --no-audit --no-fund) ||
        { tail -20 "$log" >&2; die "npm install in lib/vscode/extensions"; }
    cd - >/dev/null
    gone=$(missing_native)
    [[ -z $gone ]] || { tail -30 "$log" >&2; die "native modules not built: $gone"; }
    say "code-server installed in $((SECONDS - t)) s"
fi
"$P/node_modules/.bin/code-server" --version >/dev/null 2>&1 ||
    die "code-server does not start: $P/node_modules/.bin/code-server --version"
say "ready in $((SECONDS - started)) s: $P/node_modules/.bin/code-server, /usr/bin/chromium"
