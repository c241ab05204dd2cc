"""The stream target's engine as a *rank group* (``app.ranks``, issue 44's ``rank-hang`` and ``rank-death``): the
engine child (rank 0, :mod:`serve_apps.stream_engine`) and ``ranks - 1`` rank processes, its children, that must each
complete every step, as the tensor-parallel workers of a vLLM engine must each complete every collective.

A vLLM engine with ``tensor_parallel_size`` N runs N worker processes (``MultiprocExecutor``,
``vllm/v1/executor/multiproc_executor.py``: ``VllmWorker-{rank}``, titled ``VLLM::Worker_TP{rank}``), children of its
``EngineCore``; each step is one collective RPC to all of them, and the ranks' forward passes meet in all-reduces
(NCCL on GPUs) that have no timeout of their own beyond NCCL's watchdog (10-30 min, often off). So:

- **a rank that hangs** (a GPU that stops progressing, a rank stuck in a collective) hangs the whole group: every
  other rank blocks in the collective, the engine's I/O threads run on and its ``/health`` answers 200;
- **a rank that dies** (OOM kill, segfault, an XID) is noticed by the executor's ``MultiprocWorkerMonitor`` thread
  (``multiprocessing.connection.wait`` on the workers' process sentinels): it logs "Worker proc VllmWorker-N died
  unexpectedly", shuts the executor down and calls the engine's failure callback (``EXECUTOR_FAILED``), whose busy
  loop raises "Executor failed.": the engine is dead (``EngineDeadError`` to every request, its health check fails).

The model here, with no timeout by default as in production:

- rank 0 (the engine child) starts the ranks before its first step (:data:`GROUP_CODE` ``start_ranks``), each a
  process whose command line is :func:`rank_argv0` (``availproof::EngineRank1``, ...) with three pipes: its steps
  (rank 0 writes one byte per step), its answers (one byte per step done) and the engine's *death pipe* (rank 0 holds
  its only write end: its end of file tells the rank that its engine is gone, even while the rank hangs: vLLM's
  ``death_pipe``). Each step of rank 0 is a collective (``collective``): one byte to every rank, then one answer
  from every rank, each read blocking for as long as it takes;
- a thread per rank in rank 0 waits for the rank's end (``Popen.wait``: its process sentinel). A rank that ended
  makes rank 0 write :data:`RANK_DEAD_BYTE` to its replica and exit :data:`RANK_DEAD_EXIT` (the executor shut down):
  its replica reports :data:`MESSAGE` to every request and fails its health check, so Serve replaces it. A rank that
  died in the middle of a collective is noticed there too (a broken pipe, an end of file);
- each rank installs the engine-side fault hook as the engine does (``AVAILPROOF_ENGINE_FAULTS=1``,
  :mod:`serve_apps.engine_faults`): on SIGUSR1 it takes the rig's request, and a ``wedge`` request wedges its step
  loop for as long as its mark (:func:`serve_apps.engine_faults.wedge_path` of the rank's pid) exists (the rank's
  *hang mark*). Any other request, or none, does nothing in a rank (its faults are the hang and its death).

With one rank (the default) nothing of this runs: the engine child is as before.
"""

from __future__ import annotations

import re

from serve_apps import engine_faults

MAX_RANKS = 8
RANK_ARGV0 = "availproof::EngineRank"  # + the rank: the rank process's command line begins with it
RANK_DEAD_BYTE = b"R"  # rank 0, to its replica: a rank of its group died, the engine shut down
RANK_DEAD_EXIT = 72  # rank 0's exit status then
MESSAGE = "engine rank died: the executor shut down"  # what the replica reports (vLLM: "Executor failed.")
WEDGE = engine_faults.wedge_path(0).removesuffix("0")  # + pid: a wedge mark (the engine's; a rank's hang mark)

# what the engine child and each rank share: a file written atomically, and the wedge of the step loop
HOOK_CODE = ("def atomically(path, text):\n"
             "    tmp = f'{path}.{os.getpid()}.tmp'\n"
             "    try:  # never in the way of the fault\n"
             "        with open(tmp, 'w') as f:\n"
             "            f.write(text)\n"
             "        os.replace(tmp, path)\n"
             "        return True\n"
             "    except BaseException:\n"
             "        try:\n"
             "            os.unlink(tmp)\n"
             "        except BaseException:\n"
             "            pass\n"
             "        return False\n"
             "def wedge(request):  # the step loop blocked (or spinning) for as long as the wedge mark exists\n"
             f"    path = {WEDGE!r} + str(os.getpid())\n"
             "    if not atomically(path, json.dumps({'run': request.get('run'), 't': round(time.time(), 3)}) + '\\n'):\n"
             "        return\n"
             "    n = 0\n"
             "    while True:\n"
             "        if request.get('spin'):\n"
             "            n += 1\n"
             "            if n % 200000:\n"
             "                continue\n"
             "        elif os.path.exists(path):\n"
             f"            time.sleep({engine_faults.WEDGE_POLL_S})\n"
             "            continue\n"
             "        if not os.path.exists(path):\n"
             "            return\n")

# one rank: argv step_fd answer_fd death_fd
RANK_CODE = ("import json, os, signal, sys, threading, time\n"
             "step_fd, answer_fd, death_fd = (int(a) for a in sys.argv[1:4])\n"
             "def orphaned():  # the engine's death pipe at its end: the engine is gone, the rank goes (even hung)\n"
             "    try:\n"
             "        os.read(death_fd, 1)\n"
             "    finally:\n"
             "        os._exit(0)\n"
             "threading.Thread(target=orphaned, daemon=True).start()\n"
             + HOOK_CODE +
             f"if os.environ.get({engine_faults.ENV!r}) == '1':\n"
             "    def fault(signum, frame):  # the engine-side hook, in the rank: a wedge request hangs its step loop\n"
             "        request = {}\n"
             "        try:\n"
             f"            path = {engine_faults.request_path(0).removesuffix('0.request')!r} + str(os.getpid()) + '.request'\n"
             "            with open(path) as f:\n"
             "                request = json.loads(f.read() or '{}')\n"
             "            os.unlink(path)\n"
             "        except BaseException:\n"
             "            pass\n"
             f"        if isinstance(request, dict) and request.get('fault') == {engine_faults.WEDGE!r}:\n"
             "            wedge(request)\n"
             "    signal.signal(signal.SIGUSR1, fault)\n"
             "while True:  # a step: one byte from rank 0, one answer once done\n"
             "    if not os.read(step_fd, 1):\n"
             "        os._exit(0)\n"
             "    os.write(answer_fd, b'.')\n")

# in the engine child (rank 0), after HOOK_CODE and with `fd` its replica's pipe: start_ranks(n), collective()
GROUP_CODE = ("import subprocess, threading\n"
              "ranks = []  # (rank, its process, its step pipe's write end, its answer pipe's read end)\n"
              "def rank_died(i, code):  # vLLM's MultiprocWorkerMonitor: the executor shut down, the engine dead\n"
              "    try:\n"
              f"        os.write(fd, {RANK_DEAD_BYTE!r})\n"
              "    except BaseException:\n"
              "        pass\n"
              f"    os._exit({RANK_DEAD_EXIT})\n"
              "def start_ranks(n):\n"
              "    if n <= 1:\n"
              "        return\n"
              "    death_r, death_w = os.pipe()  # its write end held by this engine alone, for its whole life\n"
              "    python = sys.executable or os.readlink('/proc/self/exe')  # '' here: argv[0] names the engine\n"
              "    for i in range(1, n):\n"
              "        step_r, step_w = os.pipe()\n"
              "        answer_r, answer_w = os.pipe()\n"
              f"        p = subprocess.Popen([{RANK_ARGV0!r} + str(i), '-c', {RANK_CODE!r}, str(step_r), str(answer_w),\n"
              "                              str(death_r)], executable=python, stdin=subprocess.DEVNULL,\n"
              "                             pass_fds=(step_r, answer_w, death_r), close_fds=True)\n"
              "        os.close(step_r)\n"
              "        os.close(answer_w)\n"
              "        ranks.append((i, p, step_w, answer_r))\n"
              "    os.close(death_r)\n"
              "    for i, p, _, _ in ranks:  # each rank's sentinel watched\n"
              "        threading.Thread(target=lambda i=i, p=p: rank_died(i, p.wait()), daemon=True).start()\n"
              "def collective():  # every rank completes the step; no timeout (as NCCL's collectives)\n"
              "    for i, p, w, _ in ranks:\n"
              "        try:\n"
              "            os.write(w, b'.')\n"
              "        except OSError:\n"
              "            rank_died(i, p.poll())\n"
              "    for i, p, _, r in ranks:\n"
              "        if not os.read(r, 1):\n"
              "            rank_died(i, p.poll())\n")


def rank_argv0(rank: int) -> str:
    """The command line's first word of the stream target's rank ``rank`` (``availproof::EngineRank1``)."""
    return f"{RANK_ARGV0}{int(rank)}"


def check_ranks(value) -> int:
    """``app.ranks``: a whole number from 1 (no group, the default) to :data:`MAX_RANKS`; refused in one line."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_RANKS:
        raise ValueError(f"ranks must be a whole number from 1 to {MAX_RANKS} (the engine and ranks - 1 rank "
                         f"processes; 1: no rank group), got {value!r}")
    return value


# a rank's command line, on either app: the stream target's ``availproof::EngineRank1 -c ...``, vLLM's worker titled
# ``VLLM::Worker_TP1`` (``Worker_PP0_TP1`` with pipeline parallelism too): an extended regular expression (pgrep -f)
def rank_pattern(rank: int) -> str:
    """The (POSIX extended, also Python) regular expression a rank ``rank`` process's command line matches."""
    return f"(::EngineRank|_TP){int(rank)}([ _]|$)"  # vLLM's title may go on: Worker_TP1_EP1, Worker_TP1_DCP1


def is_rank(cmdline: str, rank: int) -> bool:
    return re.search(rank_pattern(rank), cmdline) is not None


# any rank process of a group (the orphan check's "whole group"): the stream target's from 1 on (its rank 0 is the engine
# child itself, already followed as the engine), every one of vLLM's workers, rank 0 included (``VLLM::Worker_TP0``: a
# process of its own, a child of ``VLLM::EngineCore``)
ANY_RANK_PATTERN = "(::EngineRank[1-9][0-9]*|_TP[0-9]+)([ _]|$)"


def is_any_rank(cmdline: str) -> bool:
    return re.search(ANY_RANK_PATTERN, cmdline) is not None
