"""The live page with the viewer's checks in it: a proxy in front of qkv serve for the tests.

Usage: selftest_proxy.py PORT SCRIPT... Listens on a free port of 127.0.0.1 and prints it;
passes every request on to qkv serve on 127.0.0.1:PORT as if sent to it (Host and Origin
its own), and adds the JavaScript files SCRIPT (tests/svg_fit.js, tests/viewer_selftest.js) at the end of any
HTML page it answers, so that the page served is the live page with its checks, while the
page qkv serves holds none. Runs until killed.
"""
import http.client
import http.server
import sys

UPSTREAM = ("127.0.0.1", int(sys.argv[1]))
SCRIPT = b"\n".join(open(f, "rb").read() for f in sys.argv[2:])


class Proxy(http.server.BaseHTTPRequestHandler):
    def relay(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        origin = "http://%s:%d" % UPSTREAM
        headers = {"Host": "%s:%d" % UPSTREAM}
        for k in ("Content-Type", "Accept"):
            if self.headers.get(k):
                headers[k] = self.headers[k]
        if self.headers.get("Origin"):
            headers["Origin"] = origin
        conn = http.client.HTTPConnection(*UPSTREAM, timeout=300)
        conn.request(self.command, self.path, body if self.command == "POST" else None, headers)
        answer = conn.getresponse()
        data = answer.read()
        kind = answer.getheader("Content-Type") or ""
        if kind.startswith("text/html") and b"</body>" in data:
            at = data.rindex(b"</body>")
            data = data[:at] + b"<script>\n" + SCRIPT + b"\n</script>\n" + data[at:]
        self.send_response(answer.status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    do_GET = do_POST = do_HEAD = relay

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
print(server.server_address[1], flush=True)
server.serve_forever()
