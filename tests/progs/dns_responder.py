#!/usr/bin/env python3
"""dns_responder.py - a tiny DNS server for the tests, on a loopback port.

    dns_responder.py PORTFILE NAME=ADDR[,ADDR...] ...

Answers A and AAAA queries for the NAMEs given (case-insensitive; ADDR an
IPv4 or IPv6 address, TTL 1 s so that the stub's floor is what keeps them),
NXDOMAIN for anything else.  Binds 127.0.0.1 on a free UDP port, writes the
port to PORTFILE, and serves until killed.  Each query's name is appended to
PORTFILE.log (what reached the upstream).
"""
import socket
import struct
import sys

def main():
    portfile = sys.argv[1]
    table = {}
    for arg in sys.argv[2:]:
        name, addrs = arg.split("=", 1)
        table[name.lower().rstrip(".")] = addrs.split(",")
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    with open(portfile + ".tmp", "w") as f:
        f.write(str(s.getsockname()[1]))
    import os
    os.rename(portfile + ".tmp", portfile)
    while True:
        q, peer = s.recvfrom(4096)
        if len(q) < 12:
            continue
        qid, flags, qd = struct.unpack("!HHH", q[:6])
        off, labels = 12, []
        while q[off]:
            n = q[off]
            labels.append(q[off + 1:off + 1 + n].decode())
            off += 1 + n
        off += 1
        qtype, _ = struct.unpack("!HH", q[off:off + 4])
        question = q[12:off + 4]
        name = ".".join(labels).lower()
        with open(portfile + ".log", "a") as f:
            f.write(name + "\n")
        answers = []
        for a in table.get(name, []):
            fam = socket.AF_INET6 if ":" in a else socket.AF_INET
            t = 28 if fam == socket.AF_INET6 else 1
            if t != qtype:
                continue
            rdata = socket.inet_pton(fam, a)
            answers.append(b"\xc0\x0c" + struct.pack("!HHIH", t, 1, 1, len(rdata)) + rdata)
        rcode = 0 if name in table else 3
        hdr = struct.pack("!HHHHHH", qid, 0x8180 | (flags & 0x0100) | rcode, 1,
                          len(answers), 0, 0)
        s.sendto(hdr + question + b"".join(answers), peer)

main()
