#!/usr/bin/python3
"""Writes the seed corpus of group_manager_fuzz (records of 6 bytes:
op, group, rank, world, endpoint, time step; see group_manager_fuzz.cc)."""
import os

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "groups")
JOIN, LEAVE, PING, REPORT, DATA, EXPIRE, DESTROY = range(7)


def rec(op, group=0, rank=0, world=0, endpoint=0, step=0):
    return bytes([op, group, rank, world, endpoint, step])


def form(group, world, ep0, job=0):
    return b"".join(rec(JOIN | (job << 3), group, r, world, ep0 + r, 1) for r in range(world))


seeds = {
    # A group forms, reports, pings through idle time, one member leaves.
    "form_idle_leave": form(1, 4, 10) + rec(REPORT, 1, 0, 4, 10, 1) +
    b"".join(rec(PING, 1, r, 4, 10 + r, 16) for r in range(4)) * 6 + rec(EXPIRE, step=1) +
    rec(LEAVE, 1, 2, 4, 12, 1),
    # A member goes silent while data keeps another alive: the lease dissolves it.
    "silent_member": form(2, 2, 20) + b"".join(rec(DATA, endpoint=0, step=20) +
                                                rec(PING, 2, 0, 2, 20, 0) +
                                                rec(EXPIRE, step=0) for _ in range(8)),
    # A crashed job's group and its re-run under another job id.
    "rerun": form(3, 3, 30, job=1) + rec(EXPIRE, step=40) + form(3, 2, 40, job=2) +
    rec(EXPIRE, step=1),
    # A flood of JOINs from 80 endpoints to groups that never complete.
    "flood": b"".join(rec(JOIN, g % 8, g % 7, 8, g, 0) for g in range(80)) +
    form(5, 2, 70) + rec(EXPIRE, step=70),
    # Operator destroys, requested ports, bad requests.
    "destroy": form(6, 3, 0) + rec(DESTROY, 6) + rec(JOIN | 0x80, 7, 0, 2, 5, 1) +
    rec(JOIN, 7, 5, 0, 6, 1) + rec(JOIN, 7, 1, 3, 6, 1) + rec(DESTROY, 7),
}

os.makedirs(HERE, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
