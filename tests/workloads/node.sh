#!/bin/sh
# Node as agents use it: npm install from the registry (through npm's cache
# in ~/.npm, filled once per build directory), npx of an installed package
# and of one npx fetches itself, and HTTPS with a CA given in
# NODE_EXTRA_CA_CERTS against a loopback server.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.inc"

# semver has a command and no dependencies; 7.6.2 is fetched by npx into
# ~/.npm/_npx since the project holds 7.6.3.
NPM_SPECS="semver@7.6.3 semver@7.6.2"

npm_home() { mkdir -p "$1.home" && cp -r "$WL_CACHE/npm" "$1.home/.npm"; }

test_npm_install_and_npx_behave_as_bare() {
    npm_cache_fill $NPM_SPECS
    cat > "$T/npm.sh" <<'EOF'
set -e
o="--no-audit --no-fund --no-update-notifier --prefer-offline"
npm init -y >/dev/null
npm install $o semver@7.6.3 >/dev/null
node -e 'console.log(require("semver").satisfies("1.2.3", "^1.0.0"))'
npx $o semver -r '>=1.2.0' 1.1.0 1.2.3 2.0.0
npx $o --yes --package=semver@7.6.2 -- semver --help | head -n 1
ls node_modules
EOF
    same_as_bare npm.sh npm_home
}

# A CA and a certificate for 127.0.0.1 made by openssl, and an HTTPS server
# on an ephemeral loopback port (python3's ssl module), all bare.  The
# agent gets the CA only: ca.pem in its workspace.
start_https() {
    need_cmd openssl
    o="$T/pki"; mkdir -p "$o"
    {
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=wl-test-ca \
            -keyout "$o/ca.key" -out "$o/ca.pem" &&
        openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 \
            -keyout "$o/srv.key" -out "$o/srv.csr" &&
        printf 'subjectAltName=IP:127.0.0.1\n' > "$o/ext" &&
        openssl x509 -req -in "$o/srv.csr" -CA "$o/ca.pem" -CAkey "$o/ca.key" \
            -CAcreateserial -days 2 -extfile "$o/ext" -out "$o/srv.pem"
    } >"$o/log" 2>&1 || { cat "$o/log"; fail "openssl"; return 1; }
    python3 - "$o" > "$o/server.log" 2>&1 <<'EOF' &
import http.server, ssl, sys
o = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello over tls\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(o + "/srv.pem", o + "/srv.key")
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
open(o + "/port.tmp", "w").write(str(srv.server_address[1]))
import os; os.rename(o + "/port.tmp", o + "/port")
srv.serve_forever()
EOF
    HTTPS_PID=$!
    i=0
    while [ ! -s "$o/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    [ -s "$o/port" ] || { cat "$o/server.log"; fail "the HTTPS server did not start"; }
}

https_ws() {
    cp "$T/pki/ca.pem" "$1/ca.pem"
    sed "s/@PORT@/$(cat "$T/pki/port")/" "$T/get.js" > "$1/get.js"
}

test_node_https_with_node_extra_ca_certs_behaves_as_bare() {
    need_cmd node
    start_https
    trap 'kill $HTTPS_PID 2>/dev/null; stop_daemon' EXIT
    cat > "$T/get.js" <<'EOF'
const https = require("https");
https.get("https://127.0.0.1:@PORT@/", (res) => {
    let body = "";
    res.on("data", (d) => { body += d; });
    res.on("end", () => { process.stdout.write(res.statusCode + " " + body); });
}).on("error", (e) => { console.log("error " + e.code); process.exit(1); });
EOF
    cat > "$T/https.sh" <<'EOF'
set -e
# Without the CA the certificate is refused; with it the request works.
node get.js || true
NODE_EXTRA_CA_CERTS=$PWD/ca.pem node get.js
EOF
    same_as_bare https.sh https_ws
}

run_tests
