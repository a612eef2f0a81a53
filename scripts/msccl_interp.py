#!/usr/bin/env python3
"""Independent reference interpreter for MSCCL XML programs ("MSCCL-IR").

Usage:
    python3 scripts/msccl_interp.py [--json] [-v] [--coll NAME] [--root R]
        [--fifo-depth N] [--no-race-check] [--trace GPU:BUF:IDX] FILE...

For every file it prints one line ``FILE: <verdict>[: detail]``:

    correct      every declared buffer mode (in-place and/or out-of-place)
                 produces the collective's expected output
    wrong        a chunk of the output holds the wrong value (first one is
                 named, with the tokens it holds vs the expected ones), a data
                 race exists (two accesses to one chunk of a GPU, at least one
                 a write, not ordered by program order / dependencies /
                 messages), a sent message is never received, or an
                 out-of-place run writes its input (NCCL's sendbuff is const)
    deadlock     no thread block can make progress before all are done
    invalid      the executor's XML parser would reject the file, a send and
                 its receive disagree on cnt, or a step reads/writes outside
                 the collective's buffers
    unsupported  the collective has no reference output here (e.g. "custom";
                 use --coll to check it as a known collective); the program is
                 still executed, so deadlock / race / invalid are reported

Exit status is 0 only if every file is ``correct``.  ``--json`` prints one JSON
document with per-mode verdicts and warnings; ``-v`` prints the warnings
(executor compatibility notes, e.g. missing attributes, step limits).

Only the Python standard library is used.

Where the semantics come from
-----------------------------
The executor was read in three versions:

* microsoft/msccl @ b23e9cd5: src/collectives/device/msccl_interpreter.h
  (runInterpreter) and src/graph/topo.cc (mscclGetAlgoFromXMLAndSetAlgo:
  XML parsing, nop / dependency / reduction-fusion lowering,
  mscclCheckBufferBounds); src/graph/tuning.cc (in-place detection).
* Azure/msccl-executor-nccl @ c6f6b36d: src/device/msccl_kernel.cu
  (mscclRunInterpreter), src/misc/msccl/msccl_parser.cc
  (mscclGetAlgoFromXmlFile, mscclCheckBufferBounds), src/include/msccl/
  msccl_parser.h (missing attributes are errors), src/misc/msccl/
  msccl_lifecycle.cc (in-place detection, algorithm selection),
  src/misc/msccl/msccl_setup.cc (work.count = count * sizeMultiplier).
* ROCm/rccl @ 0cbce2a7: src/device/msccl_kernel_impl.h,
  src/misc/msccl/msccl_parser.cc, src/include/msccl/msccl_struct.h.

They agree on the step semantics below.  They differ in what they accept:
microsoft/msccl spells the collective "reduce_scatter" and needs only
``inplace``; the newer two spell it "reducescatter" and also require
``outofplace``, ``minBytes`` and ``maxBytes``; the default step limit per
thread block (MSCCL_MAX_NUM_STEPS) is 256 in microsoft/msccl and 64 in the
newer two.  Such differences are reported as warnings, not verdicts.

The buffer layouts and expected outputs follow msccl-tools
(Azure/msccl-tools @ 7e7d6bf8) msccl/language/collectives.py (init_buffers,
check, get_buffer_index) and msccl/language/ir.py (ir_to_xml).

Model
-----
* Every GPU has an input buffer ``i``, an output buffer ``o`` and a scratch
  buffer ``s``.  A buffer is an array of chunks; chunk c of a buffer covers
  elements [c*size/nchunksperloop, (c+1)*size/nchunksperloop) of every
  grid-offset iteration (the executor computes
  ``offset = gridOffset + chunk * sizePerMscclChunk``), so one iteration is
  simulated.  Real buffer lengths come from the collective call, with
  n = nchunksperloop and G = ngpus (executor: ``sizeMultiplier`` is G for
  allgather / reducescatter / alltoall, 1 otherwise):
      allreduce, broadcast, reduce: i = n, o = n
      allgather:                    i = n/G, o = n
      reducescatter:                i = n, o = n/G
      alltoall:                     i = n, o = n
  Scratch has s_chunks chunks.
* In-place calls alias the buffers exactly like NCCL / the executor's
  in-place test (msccl_lifecycle.cc):
      allreduce, alltoall, broadcast, reduce: sendbuff == recvbuff, i[c] is o[c]
      allgather:     sendbuff == recvbuff + rank*count, i[c] is o[rank*n/G + c]
      reducescatter: recvbuff == sendbuff + rank*count, o[c] is i[rank*n/G + c]
  A file is run in the in-place layout if inplace="1" and in the
  out-of-place layout if outofplace="1" (when outofplace is absent, as in the
  older microsoft/msccl format, out-of-place is assumed iff inplace="0";
  microsoft/msccl tuning.cc selects an algorithm only if its inplace flag
  equals the call's).
* Expected outputs (msccl-tools collectives.py check()):
      allreduce      o_r[c] = sum_g i_g[c]
      allgather      o_r[g*k + c] = i_g[c]                 (k = n/G)
      reducescatter  o_r[c] = sum_g i_g[r*k + c]
      alltoall       o_r[g*k + c] = i_g[r*k + c]
      broadcast      o_r[c] = i_root[c]
      reduce         o_root[c] = sum_g i_g[c]  (other ranks unconstrained)
  The root of broadcast / reduce is the XML's ``root`` attribute, else
  --root, else inferred (the only rank that never receives / never sends).
* Values are symbolic: input chunk c of GPU g is the token i<g>[c]; every
  other chunk starts as a distinct "uninitialised" token.  A reduction is a
  multiset of tokens (sum is treated as commutative and associative, as the
  msccl-tools checker does), so a missing or duplicated contribution shows.
* Lowering of <step>s into executor transfers is the parser's:
  - ``nop`` produces no transfer; its depid/deps is added to the dependency
    list of the next non-nop step of the thread block (a trailing nop is
    dropped); a non-nop step without depid that follows nops with
    dependencies is rejected by the parser (invalid).
  - consecutive ``re`` steps with the same dst buffer+offset and src buffer,
    and no depid, are fused into one transfer (dst = dst + src1 + src2 ...,
    all read before dst is written); fusion stops after a step with
    hasdep="1" and when the thread block's reduction count reaches
    MSCCL_MAX_REDUCE_FUSION (16).
  - the executor keeps its own step counter (+1 per transfer, + extra deps,
    + extra fused reductions) and, after a transfer with hasdep="1", sets the
    thread block's flag to that counter.  A dependency (depid, deps) waits
    until flag[depid] >= deps.  Flags are only set by hasdep="1" steps, so a
    dependency on a step without hasdep waits for a later hasdep step of that
    thread block (or forever).
* Step semantics (executor's Primitives calls):
      s     send src                         (prims.send)
      r     dst = recv                       (prims.recv)
      rcs   dst = recv; send it              (prims.recvCopySend)
      rrs   send (recv + src); nothing stored locally   (prims.recvReduceSend)
      rrc   dst = recv + src                 (prims.recvReduceCopy)
      rrcs  dst = recv + src; send dst       (prims.recvReduceCopySend)
      cpy   dst = src                        (prims.localCopy)
      re    dst = dst + src                  (MSCCL_REDUCE: o = load(dst);
                                              o = redFn(src, o); store)
  A step with cnt=k works on chunks off..off+k-1 and sends one message of k
  chunks; a receive consumes the oldest message on its connection, and the
  connection of a thread block is (sender gpu, receiver gpu, tb chan).  A
  send reads its source when it executes.  A message must be received with
  the same cnt it was sent with.  A step with cnt=0 moves no data (the
  executor's chunk loop runs zero times) but still waits and sets its flag.
  The ``src`` of rrs / rrc / rrcs is a buffer of the *receiving* GPU.
* Bounds: like mscclCheckBufferBounds, the start offset of the operands the
  parser checks (src of s/rrs/rrcs/cpy/re, dst of r/rcs/rrcs/cpy/re) must be
  in -1..X_chunks-1 of the declared i/o/s_chunks; in addition every chunk a
  step really touches must lie inside the collective's buffer (invalid
  otherwise; the executor does not check this, it would read or write out of
  bounds).  Two thread blocks of one GPU sending (or receiving) to the same
  peer on the same channel would share one NCCL connection: invalid.
* A collective without reference output ("custom") is run with i and o
  distinct, as msccl-tools' DSL treats a custom Collective.
* A cpy whose source and destination are the same memory under the in-place
  aliasing (e.g. i[0] -> o[rank*n/G] of an in-place allgather) leaves memory
  unchanged and is treated as a read, not a write, by the race check.
* Scheduling: thread blocks run in order; any thread block whose next
  transfer has its dependencies satisfied and (for receives) a message waiting
  is run, until all finish or nothing can run (deadlock).  FIFOs are
  unbounded unless --fifo-depth is given.  Because a single schedule could
  hide a missing dependency, every chunk access is also checked with vector
  clocks (happens-before = program order in a thread block + send->receive +
  flag set->flag wait); two accesses to the same chunk of one GPU, at least
  one a write, that are not ordered are reported as a data race (wrong).
"""

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections import deque

MAX_REDUCE_FUSION = 16          # MSCCL_MAX_REDUCE_FUSION (all executors)
MAX_COUNT = 72                  # MSCCL_MAX_COUNT: cnt must be < 72
MAXCHANNELS = 32                # NCCL MAXCHANNELS (executor-nccl device.h)
DEFAULT_MAX_NUM_STEPS = 64      # executor-nccl makefiles/common.mk, rccl msccl_struct.h

STEP_TYPES = ("s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "nop")
RECV_TYPES = frozenset(("r", "rcs", "rrs", "rrc", "rrcs"))
SEND_TYPES = frozenset(("s", "rcs", "rrs", "rrcs"))
# Which offsets the executor's parser bound-checks (checkSrc / checkDst).
CHECK_SRC = frozenset(("s", "rrs", "rrcs", "cpy", "re"))
CHECK_DST = frozenset(("r", "rcs", "rrcs", "cpy", "re"))
# Which buffers a step really reads / writes.
READS_SRC = frozenset(("s", "rrs", "rrc", "rrcs", "cpy", "re"))
WRITES_DST = frozenset(("r", "rcs", "rrc", "rrcs", "cpy", "re"))

COLL_ALIASES = {
    "allreduce": "allreduce",
    "allgather": "allgather",
    "reducescatter": "reducescatter",
    "reduce_scatter": "reducescatter",
    "alltoall": "alltoall",
    "broadcast": "broadcast",
    "reduce": "reduce",
}


# Collective names accepted by the parsers (topo.cc / msccl_parser.cc).
COLLS_MICROSOFT_MSCCL = frozenset(("allreduce", "allgather", "reduce", "broadcast", "alltoall",
                                   "reduce_scatter", "custom"))
COLLS_EXECUTOR_NCCL = frozenset(("reduce", "broadcast", "allreduce", "reducescatter", "allgather", "send",
                                 "recv", "gather", "scatter", "alltoall", "alltoallv"))


class Invalid(Exception):
    pass


class Deadlock(Exception):
    pass


class Wrong(Exception):
    pass


# ---------------------------------------------------------------- values ---
# An atom is (0, gpu, chunk) for an input chunk, (1, gpu, region, idx) for an
# uninitialised chunk.  A value is a sorted tuple of atoms (a multiset).

def input_value(g, c):
    return ((0, g, c),)


def garbage_value(g, region, idx):
    return ((1, g, region, idx),)


def reduce_values(a, b):
    return tuple(sorted(a + b))


def atom_str(a):
    if a[0] == 0:
        return "i%d[%d]" % (a[1], a[2])
    return "uninit(gpu%d %s[%d])" % (a[1], a[2], a[3])


def value_str(v, limit=12):
    if v is None:
        return "nothing"
    parts = [atom_str(a) for a in v]
    if len(parts) > limit:
        return "+".join(parts[:limit]) + "+...(%d terms)" % len(parts)
    return "+".join(parts)


def value_diff(got, exp):
    from collections import Counter
    cg, ce = Counter(got), Counter(exp)
    missing = list((ce - cg).elements())
    extra = list((cg - ce).elements())
    out = []
    if missing:
        out.append("missing " + value_str(tuple(missing), 6))
    if extra:
        out.append("extra " + value_str(tuple(extra), 6))
    return "; ".join(out)


# --------------------------------------------------------------- parsing ---

class Transfer(object):
    __slots__ = ("type", "srcbuf", "srcoff", "dstbuf", "dstoff", "count",
                 "deps", "hasdep", "red_srcoffs", "xml_steps", "flag_step")

    def __init__(self):
        self.red_srcoffs = None
        self.xml_steps = []
        self.deps = []

    def where(self):
        return "s=%s" % ",".join(str(s) for s in self.xml_steps)


class TB(object):
    def __init__(self, gpu, bid, send, recv, chan):
        self.gpu, self.bid, self.send, self.recv, self.chan = gpu, bid, send, recv, chan
        self.transfers = []
        self.nsteps_xml = 0


def _int_attr(elem, name, what):
    v = elem.get(name)
    if v is None:
        raise Invalid("%s has no '%s' attribute (the executor's parser requires it)" % (what, name))
    try:
        return int(v)
    except ValueError:
        raise Invalid("%s attribute %s=%r is not an integer" % (what, name, v))


def _str_attr(elem, name, what):
    v = elem.get(name)
    if v is None:
        raise Invalid("%s has no '%s' attribute (the executor's parser requires it)" % (what, name))
    return v


class Algo(object):
    pass


def parse(path, warnings):
    try:
        tree = ET.parse(path)
    except ET.ParseError as e:
        raise Invalid("not well-formed XML: %s" % e)
    root = tree.getroot()
    if root.tag != "algo":
        raise Invalid("root element is <%s>, not <algo>" % root.tag)
    A = Algo()
    A.name = root.get("name", "")
    A.proto = root.get("proto")
    A.nchunks = _int_attr(root, "nchunksperloop", "<algo>")
    if A.nchunks <= 0:
        raise Invalid("nchunksperloop must be positive")
    A.coll_raw = _str_attr(root, "coll", "<algo>")
    A.coll = COLL_ALIASES.get(A.coll_raw)
    old_ok = A.coll_raw in COLLS_MICROSOFT_MSCCL
    new_ok = A.coll_raw in COLLS_EXECUTOR_NCCL
    if not old_ok and not new_ok:
        raise Invalid("coll=%r is accepted by no executor" % A.coll_raw)
    if not new_ok:
        warnings.append('coll="%s" is accepted by microsoft/msccl only; msccl-executor-nccl and rccl '
                        'would reject this file%s' % (A.coll_raw, ' (they expect "reducescatter")'
                                                      if A.coll_raw == "reduce_scatter" else ""))
    if not old_ok:
        warnings.append('coll="%s" is not accepted by microsoft/msccl%s' % (A.coll_raw, ' (it expects "reduce_scatter")'
                                                                            if A.coll_raw == "reducescatter" else ""))
    A.inplace = _int_attr(root, "inplace", "<algo>")
    for a in ("ngpus", "nchannels", "proto"):   # required by every executor's parser
        _str_attr(root, a, "<algo>")
    missing_new = [a for a in ("outofplace", "minBytes", "maxBytes") if root.get(a) is None]
    if missing_new:
        warnings.append("<algo> lacks %s, which msccl-executor-nccl and rccl require (they would reject "
                        "the file; microsoft/msccl accepts it)" % "/".join(missing_new))
    if root.get("outofplace") is None:
        A.outofplace = 0 if A.inplace else 1
        warnings.append("no outofplace attribute (microsoft/msccl format): assuming outofplace=%d"
                        % A.outofplace)
    else:
        A.outofplace = _int_attr(root, "outofplace", "<algo>")
    A.root = int(root.get("root")) if root.get("root") is not None else None
    gpus = [e for e in root if e.tag == "gpu"]
    A.ngpus = _int_attr(root, "ngpus", "<algo>")
    if A.proto not in ("Simple", "LL", "LL128"):
        raise Invalid("proto=%r is not Simple, LL or LL128" % A.proto)
    A.gpus = {}
    for ge in gpus:
        g = _int_attr(ge, "id", "<gpu>")
        if g in A.gpus:
            raise Invalid("duplicate <gpu id=%d>" % g)
        if not 0 <= g < A.ngpus:
            raise Invalid("<gpu id=%d> outside 0..ngpus-1" % g)
        gi = Algo()
        gi.i_chunks = _int_attr(ge, "i_chunks", "<gpu %d>" % g)
        gi.o_chunks = _int_attr(ge, "o_chunks", "<gpu %d>" % g)
        gi.s_chunks = _int_attr(ge, "s_chunks", "<gpu %d>" % g)
        if gi.s_chunks < 0:
            raise Invalid("gpu %d: negative s_chunks" % g)
        gi.tbs = {}
        for te in ge:
            if te.tag != "tb":
                continue
            tb = _parse_tb(A, g, gi, te, warnings)
            if tb.bid in gi.tbs:
                raise Invalid("gpu %d: duplicate thread block id %d" % (g, tb.bid))
            gi.tbs[tb.bid] = tb
        for b in range(len(gi.tbs)):
            if b not in gi.tbs:
                raise Invalid("gpu %d: thread block %d is missing (ids must be 0..n-1)" % (g, b))
        A.gpus[g] = gi
    long_tbs = [(g, tb.bid, tb.nsteps_xml) for g, gi in sorted(A.gpus.items())
                for tb in gi.tbs.values() if tb.nsteps_xml > DEFAULT_MAX_NUM_STEPS]
    if long_tbs:
        g, b, n = max(long_tbs, key=lambda x: x[2])
        warnings.append("%d thread block(s) have more than %d steps (max %d, gpu %d tb %d): over the default "
                        "MSCCL_MAX_NUM_STEPS of msccl-executor-nccl and rccl (microsoft/msccl allows 256)"
                        % (len(long_tbs), DEFAULT_MAX_NUM_STEPS, n, g, b))
    # microsoft/msccl topo.cc: (nInputChunks > 0 && nInputChunks*inputNChunksMultiplier != nchunksPerLoop)
    # || (nOutputChunks > 0 && nOutputChunks*outputNChunksMultiplier != nchunksPerLoop) -> rejected.
    imul = A.ngpus if A.coll_raw == "allgather" else 1
    omul = A.ngpus if A.coll_raw in ("reduce_scatter", "reducescatter") else 1
    bad = [g for g, gi in sorted(A.gpus.items())
           if (gi.i_chunks > 0 and gi.i_chunks * imul != A.nchunks) or (gi.o_chunks > 0 and gi.o_chunks * omul != A.nchunks)]
    if bad:
        warnings.append("i_chunks/o_chunks of gpu %d (and %d more) are inconsistent with nchunksperloop=%d; "
                        "microsoft/msccl would reject the file (the newer executors do not check this)"
                        % (bad[0], len(bad) - 1, A.nchunks))
    missing = [g for g in range(A.ngpus) if g not in A.gpus]
    if missing:
        raise Invalid("no <gpu> element for rank(s) %s" % missing)
    # Connections: one send / one recv connection per (peer, channel) per GPU.
    for g, gi in A.gpus.items():
        seen_s, seen_r = {}, {}
        for tb in gi.tbs.values():
            if tb.send >= 0 and any(t.type in SEND_TYPES for t in tb.transfers):
                k = (tb.send, tb.chan)
                if k in seen_s:
                    raise Invalid("gpu %d: thread blocks %d and %d both send to gpu %d on channel %d "
                                  "(they would share one NCCL connection)" % (g, seen_s[k], tb.bid, k[0], k[1]))
                seen_s[k] = tb.bid
            if tb.recv >= 0 and any(t.type in RECV_TYPES for t in tb.transfers):
                k = (tb.recv, tb.chan)
                if k in seen_r:
                    raise Invalid("gpu %d: thread blocks %d and %d both receive from gpu %d on channel %d "
                                  "(they would share one NCCL connection)" % (g, seen_r[k], tb.bid, k[0], k[1]))
                seen_r[k] = tb.bid
    return A


def _parse_tb(A, g, gi, te, warnings):
    what = "gpu %d <tb>" % g
    bid = _int_attr(te, "id", what)
    send = _int_attr(te, "send", what)
    recv = _int_attr(te, "recv", what)
    chan = _int_attr(te, "chan", what)
    what = "gpu %d tb %d" % (g, bid)
    if bid < 0:
        raise Invalid("%s: negative thread block id" % what)
    if send == g or recv == g:
        raise Invalid("%s: send/recv peer is the gpu itself" % what)
    if send < -1 or recv < -1 or send >= A.ngpus or recv >= A.ngpus:
        raise Invalid("%s: peer out of range (send=%d recv=%d)" % (what, send, recv))
    if chan < 0 or chan > MAXCHANNELS:
        raise Invalid("%s: invalid channel %d" % (what, chan))
    tb = TB(g, bid, send, recv, chan)

    # --- lowering, mirroring mscclGetAlgoFromXmlFile ---
    all_deps = []
    old_dep_ptr = 0
    red_dst_buf = red_dst_off = red_src_buf = None
    num_reductions = 0
    transfers = tb.transfers
    pos = 0
    for se in te:
        if se.tag != "step":
            continue
        sw = "%s step #%d" % (what, pos)
        s = _int_attr(se, "s", sw)
        sw = "%s step s=%d" % (what, s)
        if s != pos:
            warnings.append("%s: s attribute is %d but the step is number %d in document order" % (what, s, pos))
        pos += 1
        if s < 0:
            raise Invalid("%s: negative step number" % sw)
        srcoff = _int_attr(se, "srcoff", sw)
        srcbuf = _str_attr(se, "srcbuf", sw)
        dstoff = _int_attr(se, "dstoff", sw)
        dstbuf = _str_attr(se, "dstbuf", sw)
        cnt = _int_attr(se, "cnt", sw)
        typ = _str_attr(se, "type", sw)
        depid = _int_attr(se, "depid", sw)
        deps = _int_attr(se, "deps", sw)
        hasdep = _int_attr(se, "hasdep", sw)
        if typ not in STEP_TYPES:
            raise Invalid("%s: step type %r is not supported by the executor's parser" % (sw, typ))
        for b in (srcbuf, dstbuf):
            if b not in ("i", "o", "s"):
                raise Invalid("%s: buffer type %r is not i/o/s" % (sw, b))
        if depid >= 0:
            all_deps.append((depid, deps))
        continuation = False
        if typ == "re":
            if (red_dst_buf == dstbuf and red_dst_off == dstoff and red_src_buf == srcbuf
                    and depid == -1):
                continuation = True
            else:
                red_dst_buf = red_dst_off = None
        if typ == "nop":
            continue
        if continuation:
            tr = transfers[-1]
            if tr.count != cnt:
                warnings.append("%s: fused re steps have different cnt; the executor uses the last one (%d)"
                                % (sw, cnt))
        else:
            tr = Transfer()
            transfers.append(tr)
        tr.type = typ
        tr.srcbuf, tr.srcoff, tr.dstbuf, tr.dstoff = srcbuf, srcoff, dstbuf, dstoff
        if cnt < 0 or cnt >= MAX_COUNT:
            raise Invalid("%s: cnt=%d must be in 0..%d" % (sw, cnt, MAX_COUNT - 1))
        tr.count = cnt
        if typ in SEND_TYPES and send < 0:
            raise Invalid("%s: %s step in a thread block without a send peer" % (sw, typ))
        if typ in RECV_TYPES and recv < 0:
            raise Invalid("%s: %s step in a thread block without a recv peer" % (sw, typ))
        if typ in CHECK_SRC:
            _check_bounds_decl(gi, srcbuf, srcoff, sw, "src")
        if typ in CHECK_DST:
            _check_bounds_decl(gi, dstbuf, dstoff, sw, "dst")
        if not continuation:
            tr.deps = all_deps[old_dep_ptr:]
            if tr.deps and depid < 0:
                raise Invalid("%s: nop dependencies are followed by a step without depid; the "
                              "executor's parser rejects this ('when there is a chain of dependences...')" % sw)
            old_dep_ptr = len(all_deps)
        if typ != "re":
            red_dst_buf = red_dst_off = red_src_buf = None
        else:
            if not continuation:
                tr.red_srcoffs = []
            tr.red_srcoffs.append(srcoff)
            num_reductions += 1
            if hasdep or num_reductions == MAX_REDUCE_FUSION:
                red_dst_buf = red_dst_off = None
            else:
                red_dst_buf, red_dst_off, red_src_buf = dstbuf, dstoff, srcbuf
        if hasdep not in (0, 1):
            raise Invalid("%s: hasdep must be 0 or 1" % sw)
        tr.hasdep = hasdep
        tr.xml_steps.append(s)
    tb.nsteps_xml = pos
    if old_dep_ptr < len(all_deps):
        warnings.append("%s: trailing nop dependencies are ignored by the executor" % what)
    # The executor's own step counter, used as the flag value.
    step = 0
    for tr in transfers:
        if tr.deps:
            step += len(tr.deps) - 1
        if tr.type == "re":
            step += len(tr.red_srcoffs) - 1
        tr.flag_step = step
        if step != tr.xml_steps[-1]:
            warnings.append("%s: executor step counter %d differs from s=%d (a nop without "
                            "dependency?); flags will be set with the counter value"
                            % (what, step, tr.xml_steps[-1]))
        step += 1
    return tb


def _check_bounds_decl(gi, buf, off, sw, which):
    n = {"i": gi.i_chunks, "o": gi.o_chunks, "s": gi.s_chunks}[buf]
    if off < -1 or off >= n:
        raise Invalid("%s: %s offset %d outside the declared %s_chunks=%d (mscclCheckBufferBounds)"
                      % (sw, which, off, buf, n))


# ---------------------------------------------------------------- layout ---

class Layout(object):
    """Maps (gpu, logical buffer, chunk) to a physical chunk key."""

    def __init__(self, A, inplace):
        self.A = A
        self.inplace = inplace
        n, G = A.nchunks, A.ngpus
        coll = A.coll
        if coll in ("allgather", "reducescatter", "alltoall"):
            if n % G:
                raise Invalid("nchunksperloop=%d is not a multiple of ngpus=%d" % (n, G))
        k = n // G
        self.k = k
        self.sizes = {}
        for g, gi in A.gpus.items():
            if coll in ("allreduce", "broadcast", "reduce", "alltoall"):
                si, so = n, n
            elif coll == "allgather":
                si, so = k, n
            elif coll == "reducescatter":
                si, so = n, k
            else:
                si, so = gi.i_chunks, gi.o_chunks
            self.sizes[g] = {"i": si, "o": so, "s": gi.s_chunks}

    def phys(self, g, buf, idx):
        if buf == "s":
            return (g, "s", idx)
        if not self.inplace:
            return (g, buf, idx)
        coll = self.A.coll
        if coll == "allgather":
            return (g, "m", idx + g * self.k) if buf == "i" else (g, "m", idx)
        if coll == "reducescatter":
            return (g, "m", idx + g * self.k) if buf == "o" else (g, "m", idx)
        return (g, "m", idx)

    def initial(self):
        mem = {}
        for g in self.A.gpus:
            sz = self.sizes[g]
            for buf in ("i", "o", "s"):
                for c in range(sz[buf]):
                    key = self.phys(g, buf, c)
                    if buf == "i":
                        mem[key] = input_value(g, c)
                    elif key not in mem:
                        mem[key] = garbage_value(g, key[1], key[2])
        return mem


# -------------------------------------------------------------- executor ---

def join(a, b):
    return [x if x >= y else y for x, y in zip(a, b)]


class Run(object):
    def __init__(self, A, layout, fifo_depth, race_check=True):
        self.A, self.L, self.fifo_depth = A, layout, fifo_depth
        self.race_check = race_check
        self.trace = set()
        self.input_write = None
        self.self_copy = None
        self.mem = layout.initial()
        self.tbs = []
        for g in sorted(A.gpus):
            for b in sorted(A.gpus[g].tbs):
                self.tbs.append(A.gpus[g].tbs[b])
        self.index = {(tb.gpu, tb.bid): i for i, tb in enumerate(self.tbs)}
        T = len(self.tbs)
        self.vc = [[0] * T for _ in range(T)]
        for i in range(T):
            self.vc[i][i] = 1
        self.pc = [0] * T
        self.flags = [[] for _ in range(T)]  # list of (flag value, vc snapshot)
        self.queues = {}
        self.last_write = {}   # phys key -> (tid, clock, description)
        self.readers = {}      # phys key -> {tid: (clock, description)}

    # -- memory with race detection --
    def _desc(self, tid):
        tb = self.tbs[tid]
        tr = tb.transfers[self.pc[tid]]
        return "gpu %d tb %d %s (%s)" % (tb.gpu, tb.bid, tr.where(), tr.type)

    def _slot(self, g, buf, off, i, tid):
        idx = off + i
        if idx < 0 or idx >= self.L.sizes[g][buf]:
            raise Invalid("%s accesses %s[%d] outside the buffer (%d chunks)"
                          % (self._desc(tid), buf, idx, self.L.sizes[g][buf]))
        return self.L.phys(g, buf, idx)

    def read(self, tid, g, buf, off, cnt):
        out = []
        vc = self.vc[tid]
        for i in range(cnt):
            key = self._slot(g, buf, off, i, tid)
            lw = self.last_write.get(key)
            if self.race_check and lw is not None and lw[0] != tid and vc[lw[0]] < lw[1]:
                raise Wrong("data race on gpu %d %s[%d]: read by %s is not ordered after the write by %s"
                            % (g, buf, off + i, self._desc(tid), lw[2]))
            self.readers.setdefault(key, {})[tid] = (vc[tid], self._desc(tid))
            out.append(self.mem[key])
        return out

    def write(self, tid, g, buf, off, vals):
        vc = self.vc[tid]
        if buf == "i" and not self.L.inplace and self.input_write is None:
            self.input_write = "%s writes gpu %d i[%d]" % (self._desc(tid), g, off)
        for i, v in enumerate(vals):
            key = self._slot(g, buf, off, i, tid)
            lw = self.last_write.get(key)
            if not self.race_check:
                lw = None
            if lw is not None and lw[0] != tid and vc[lw[0]] < lw[1]:
                raise Wrong("data race on gpu %d %s[%d]: writes by %s and %s are not ordered"
                            % (g, buf, off + i, lw[2], self._desc(tid)))
            for rt, (rc, rd) in (self.readers.get(key, {}).items() if self.race_check else ()):
                if rt != tid and vc[rt] < rc:
                    raise Wrong("data race on gpu %d %s[%d]: write by %s is not ordered after the read by %s"
                                % (g, buf, off + i, self._desc(tid), rd))
            self.readers[key] = {}
            self.last_write[key] = (tid, vc[tid], self._desc(tid))
            self.mem[key] = v
            if key in self.trace:
                sys.stderr.write("trace: %s writes gpu %d %s[%d] := %s\n"
                                 % (self._desc(tid), g, buf, off + i, value_str(v, 64)))

    # -- scheduling --
    def _deps_ok(self, tid, tr, collect=None):
        g = self.tbs[tid].gpu
        for (dbid, dstep) in tr.deps:
            dt = self.index.get((g, dbid))
            if dt is None:
                if collect is not None:
                    collect.append("waits on nonexistent tb %d" % dbid)
                return False
            ok = None
            for fv, snap in self.flags[dt]:
                if fv >= dstep:
                    ok = snap
                    break
            if ok is None:
                if collect is not None:
                    have = self.flags[dt][-1][0] if self.flags[dt] else "unset"
                    collect.append("waits for tb %d step %d (flag %s)" % (dbid, dstep, have))
                return False
        return True

    def _can_run(self, tid):
        tb = self.tbs[tid]
        tr = tb.transfers[self.pc[tid]]
        if not self._deps_ok(tid, tr):
            return False
        if tr.count > 0:
            if tr.type in RECV_TYPES and not self.queues.get((tb.recv, tb.gpu, tb.chan)):
                return False
            if tr.type in SEND_TYPES and self.fifo_depth is not None:
                q = self.queues.get((tb.gpu, tb.send, tb.chan))
                if q is not None and len(q) >= self.fifo_depth:
                    return False
        return True

    def _step(self, tid):
        tb = self.tbs[tid]
        tr = tb.transfers[self.pc[tid]]
        g = tb.gpu
        vc = self.vc[tid]
        for (dbid, dstep) in tr.deps:
            dt = self.index[(g, dbid)]
            for fv, snap in self.flags[dt]:
                if fv >= dstep:
                    vc[:] = join(vc, snap)
                    break
        t, cnt = tr.type, tr.count
        if cnt > 0:
            msg = None
            if t in RECV_TYPES:
                q = self.queues[(tb.recv, g, tb.chan)]
                mvals, mvc, mdesc = q.popleft()
                if len(mvals) != cnt:
                    raise Invalid("%s receives cnt=%d but the matching send (%s) sent cnt=%d"
                                  % (self._desc(tid), cnt, mdesc, len(mvals)))
                vc[:] = join(vc, mvc)
                msg = mvals
            if t == "s":
                self._send(tid, self.read(tid, g, tr.srcbuf, tr.srcoff, cnt))
            elif t == "r":
                self.write(tid, g, tr.dstbuf, tr.dstoff, msg)
            elif t == "rcs":
                self.write(tid, g, tr.dstbuf, tr.dstoff, msg)
                self._send(tid, msg)
            elif t == "rrs":
                src = self.read(tid, g, tr.srcbuf, tr.srcoff, cnt)
                self._send(tid, [reduce_values(m, s) for m, s in zip(msg, src)])
            elif t == "rrc":
                src = self.read(tid, g, tr.srcbuf, tr.srcoff, cnt)
                self.write(tid, g, tr.dstbuf, tr.dstoff, [reduce_values(m, s) for m, s in zip(msg, src)])
            elif t == "rrcs":
                src = self.read(tid, g, tr.srcbuf, tr.srcoff, cnt)
                vals = [reduce_values(m, s) for m, s in zip(msg, src)]
                self.write(tid, g, tr.dstbuf, tr.dstoff, vals)
                self._send(tid, vals)
            elif t == "cpy":
                vals = self.read(tid, g, tr.srcbuf, tr.srcoff, cnt)
                if all(self._slot(g, tr.srcbuf, tr.srcoff, i, tid) == self._slot(g, tr.dstbuf, tr.dstoff, i, tid)
                       for i in range(cnt)):
                    # In-place aliasing makes this a copy of memory onto itself:
                    # the bytes do not change, so it is treated as a read only.
                    if self.self_copy is None:
                        self.self_copy = self._desc(tid)
                else:
                    self.write(tid, g, tr.dstbuf, tr.dstoff, vals)
            elif t == "re":
                acc = self.read(tid, g, tr.dstbuf, tr.dstoff, cnt)
                srcs = [self.read(tid, g, tr.srcbuf, so, cnt) for so in tr.red_srcoffs]
                for src in srcs:
                    acc = [reduce_values(s, o) for s, o in zip(src, acc)]
                self.write(tid, g, tr.dstbuf, tr.dstoff, acc)
        if tr.hasdep:
            self.flags[tid].append((tr.flag_step, list(vc)))
        self.pc[tid] += 1
        vc[tid] += 1

    def _send(self, tid, vals):
        tb = self.tbs[tid]
        key = (tb.gpu, tb.send, tb.chan)
        self.queues.setdefault(key, deque()).append((list(vals), list(self.vc[tid]), self._desc(tid)))

    def run(self):
        T = len(self.tbs)
        progress = True
        while progress:
            progress = False
            for tid in range(T):
                n = len(self.tbs[tid].transfers)
                while self.pc[tid] < n and self._can_run(tid):
                    self._step(tid)
                    progress = True
        stuck = []
        for tid, tb in enumerate(self.tbs):
            if self.pc[tid] < len(tb.transfers):
                tr = tb.transfers[self.pc[tid]]
                why = []
                self._deps_ok(tid, tr, why)
                if not why and tr.type in RECV_TYPES:
                    why.append("waits for a message from gpu %d on channel %d" % (tb.recv, tb.chan))
                if not why and tr.type in SEND_TYPES:
                    why.append("send FIFO to gpu %d on channel %d is full" % (tb.send, tb.chan))
                stuck.append("gpu %d tb %d at %s (%s) %s" % (tb.gpu, tb.bid, tr.where(), tr.type, "; ".join(why)))
        if stuck:
            more = " (and %d more)" % (len(stuck) - 3) if len(stuck) > 3 else ""
            raise Deadlock("%d thread block(s) blocked: %s%s" % (len(stuck), " | ".join(stuck[:3]), more))

    def check_unreceived(self):
        left = [(k, len(q)) for k, q in sorted(self.queues.items()) if q]
        if left:
            (s, r, c), nmsg = left[0]
            raise Wrong("%d message(s) sent by gpu %d to gpu %d on channel %d are never received (first: %s)"
                        % (nmsg, s, r, c, self.queues[(s, r, c)][0][2]))

    def value(self, g, buf, idx):
        return self.mem[self.L.phys(g, buf, idx)]


# ------------------------------------------------------------ reference ---

def expected_outputs(A, L, root):
    """Yield (gpu, o index, expected value) for the collective."""
    n, G, k = A.nchunks, A.ngpus, L.k
    coll = A.coll
    for r in range(G):
        if coll == "allreduce":
            for c in range(n):
                yield r, c, tuple(sorted((0, g, c) for g in range(G)))
        elif coll == "allgather":
            for g in range(G):
                for c in range(k):
                    yield r, g * k + c, input_value(g, c)
        elif coll == "reducescatter":
            for c in range(k):
                yield r, c, tuple(sorted((0, g, r * k + c) for g in range(G)))
        elif coll == "alltoall":
            for g in range(G):
                for c in range(k):
                    yield r, g * k + c, input_value(g, r * k + c)
        elif coll == "broadcast":
            for c in range(n):
                yield r, c, input_value(root, c)
        elif coll == "reduce":
            if r == root:
                for c in range(n):
                    yield r, c, tuple(sorted((0, g, c) for g in range(G)))


def infer_root(A, cli_root, notes):
    if A.root is not None:
        return A.root
    if cli_root is not None:
        return cli_root
    cands = []
    for g, gi in A.gpus.items():
        types = [t.type for tb in gi.tbs.values() for t in tb.transfers]
        if A.coll == "broadcast" and not any(t in RECV_TYPES for t in types):
            cands.append(g)
        if A.coll == "reduce" and not any(t in SEND_TYPES for t in types):
            cands.append(g)
    if len(cands) == 1:
        notes.append("root inferred as %d" % cands[0])
        return cands[0]
    raise Invalid("cannot infer the root of %s (candidates %s); pass --root" % (A.coll, cands))


def check_mode(A, inplace, args, notes):
    L = Layout(A, inplace)
    R = Run(A, L, args.fifo_depth, not args.no_race_check)
    for t in args.trace or ():
        tg, tbuf, tidx = t.split(":")
        R.trace.add(L.phys(int(tg), tbuf, int(tidx)))
    R.run()
    if R.self_copy:
        notes.append("cpy onto the same memory (no-op under this aliasing, treated as a read): " + R.self_copy)
    if R.input_write:
        # NCCL's API takes sendbuff as const: a program that writes it out of place
        # corrupts the caller's data even when the output is right.
        raise Wrong("out-of-place run modifies the input buffer (NCCL's sendbuff is const): "
                    + R.input_write)
    if A.coll is not None:
        root = infer_root(A, args.root, notes) if A.coll in ("broadcast", "reduce") else None
        for r, c, exp in expected_outputs(A, L, root):
            got = R.value(r, "o", c)
            if got != exp:
                raise Wrong("gpu %d o[%d] holds %s, expected %s (%s)"
                            % (r, c, value_str(got), value_str(exp), value_diff(got, exp)))
    R.check_unreceived()
    return None


def interpret(path, args):
    res = {"file": path, "verdict": None, "detail": "", "modes": {}, "warnings": []}
    warnings = res["warnings"]
    try:
        A = parse(path, warnings)
    except Invalid as e:
        res["verdict"], res["detail"] = "invalid", str(e)
        return res
    if getattr(args, "coll", None):
        if A.coll is not None and A.coll != COLL_ALIASES[args.coll]:
            warnings.append("--coll %s overrides coll=%r" % (args.coll, A.coll_raw))
        A.coll = COLL_ALIASES[args.coll]
    res["collective"] = A.coll or A.coll_raw
    res["ngpus"], res["nchunksperloop"] = A.ngpus, A.nchunks
    res["inplace"], res["outofplace"] = A.inplace, A.outofplace
    modes = []
    if A.coll is None:
        # No known aliasing for an unknown collective: msccl-tools' DSL keeps
        # i and o distinct for a custom Collective (no get_buffer_index).
        modes.append("out-of-place")
        if A.inplace:
            warnings.append("collective %r: in-place aliasing is unknown; buffers i and o are "
                            "simulated as distinct" % A.coll_raw)
    else:
        if A.inplace:
            modes.append("in-place")
        if A.outofplace:
            modes.append("out-of-place")
    if not modes:
        res["verdict"], res["detail"] = "invalid", "both inplace and outofplace are 0 (never selected)"
        return res
    rank = {"invalid": 0, "deadlock": 1, "wrong": 2, "unsupported": 3, "correct": 4}
    worst = None
    for m in modes:
        notes = []
        try:
            check_mode(A, m == "in-place", args, notes)
            if A.coll is None:
                v, d = "unsupported", ("collective %r has no reference output; ran to completion "
                                       "without deadlock or data race" % A.coll_raw)
            else:
                v, d = "correct", ""
        except Invalid as e:
            v, d = "invalid", str(e)
        except Deadlock as e:
            v, d = "deadlock", str(e)
        except Wrong as e:
            v, d = "wrong", str(e)
        for n in notes:
            warnings.append("%s: %s" % (m, n))
        res["modes"][m] = {"verdict": v, "detail": d}
        if worst is None or rank[v] < rank[worst[0]]:
            worst = (v, d, m)
    v, d, m = worst
    res["verdict"] = v
    if v != "correct":
        res["detail"] = "(%s) %s" % (m, d)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    ap.add_argument("--root", type=int, default=None,
                    help="root rank for broadcast/reduce when the XML has no root attribute")
    ap.add_argument("--coll", choices=sorted(COLL_ALIASES), default=None,
                    help="check the program as this collective (e.g. for coll=\"custom\" programs)")
    ap.add_argument("--fifo-depth", type=int, default=None,
                    help="bound on unreceived messages per connection (default: unbounded). Steps run "
                         "atomically, so a receive-and-send step needs a free slot; NCCL pipelines such "
                         "steps slice by slice through NCCL_STEPS=8 slots, so 1 is stricter than the "
                         "hardware and 2 is a reasonable check")
    ap.add_argument("--no-race-check", action="store_true",
                    help="do not report data races; only compare the final values of this schedule")
    ap.add_argument("--trace", action="append", metavar="GPU:BUF:IDX",
                    help="print every write to this chunk (e.g. 1:o:0) on stderr; repeatable")
    ap.add_argument("-v", "--verbose", action="store_true", help="also print warnings")
    args = ap.parse_args(argv)
    results = []
    for f in args.files:
        try:
            r = interpret(f, args)
        except OSError as e:
            r = {"file": f, "verdict": "invalid", "detail": "cannot read: %s" % e, "modes": {}, "warnings": []}
        results.append(r)
        if not args.json:
            line = "%s: %s" % (f, r["verdict"])
            if r["detail"]:
                line += ": " + r["detail"]
            print(line)
            if args.verbose:
                for w in r["warnings"]:
                    print("    warning: " + w)
            sys.stdout.flush()
    if args.json:
        json.dump(results, sys.stdout, indent=1)
        print()
    return 0 if all(r["verdict"] == "correct" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
