#!/usr/bin/env python3
"""relp_closer.py PORTFILE LOG ANSWER: a RELP collector that stops the way
rsyslog's imrelp does on SIGTERM.

On its first session it answers the open and the first ANSWER syslog
frames, leaves the rest unanswered, and when the client sends "close"
it sends the hint "serverclose" and closes the connection (imrelp, told
to stop, drops the frames it has not handled yet and says serverclose).
Every later session is answered in full.  Each syslog frame answered
"200" is appended to LOG (one message a line): what the collector took.
Writes its port to PORTFILE once listening; runs until killed.
"""
import os
import socket
import sys

portfile, logpath, answer = sys.argv[1], sys.argv[2], int(sys.argv[3])
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(4)
with open(portfile + ".new", "w") as f:
    f.write("%d\n" % srv.getsockname()[1])
os.rename(portfile + ".new", portfile)
log = open(logpath, "ab", buffering=0)


def frames(conn):
    """RELP frames: TXNR SP COMMAND SP DATALEN [SP DATA] LF."""
    buf = b""
    while True:
        while True:
            parts = buf.split(b" ", 3)
            if len(parts) >= 3 and (len(parts) == 4 or buf.endswith(b"\n")):
                txnr, cmd = int(parts[0]), parts[1].decode()
                rest = buf[len(parts[0]) + len(parts[1]) + 2:]
                digits = len(rest) - len(rest.lstrip(b"0123456789"))
                if digits and digits < len(rest):
                    n = int(rest[:digits])
                    start = digits + (1 if n else 0)
                    if len(rest) >= start + n + 1:
                        data = rest[start:start + n]
                        assert rest[start + n:start + n + 1] == b"\n", "bad trailer"
                        buf = rest[start + n + 1:]
                        yield txnr, cmd, data
                        continue
            break
        chunk = conn.recv(65536)
        if not chunk:
            return
        buf += chunk


def rsp(conn, txnr, text):
    conn.sendall(b"%d rsp %d %s\n" % (txnr, len(text), text))


session = 0
while True:
    conn, _ = srv.accept()
    session += 1
    answered = 0
    for txnr, cmd, data in frames(conn):
        if cmd == "open":
            rsp(conn, txnr, b"200 OK\nrelp_version=0\nrelp_software=relp_closer\ncommands=syslog")
        elif cmd == "syslog":
            if session > 1 or answered < answer:
                log.write(data + b"\n")
                rsp(conn, txnr, b"200 OK")
                answered += 1
        elif cmd == "close":
            if session == 1:
                conn.sendall(b"0 serverclose 0\n")
            else:
                rsp(conn, txnr, b"")    # librelp answers a close with no text
            break
    conn.close()
