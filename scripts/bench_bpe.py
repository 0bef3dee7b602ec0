#!/usr/bin/env python3
"""Lab 12's byte-level BPE against a straightforward Python BPE of the same algorithm (maintainers).

The Python side is the algorithm of labs/12-tokens.md written plainly: special tokens split out
first, GPT-2's pattern with the `regex` module, a Counter of pre-tokens, pair counts updated
incrementally through an index from pair to words, the most frequent pair with ties to the
greatest (left bytes, right bytes), and encoding by merge rank with a cache per pre-token. Both
train on the King James Bible's training books (`workbook corpus`) and encode them; the script
checks that the merges and the token ids are identical, then prints time, CPU time, peak memory
and the ratios. The C++ side runs as `build/bin/tokenize-reference` (what `workbook tokenize`
runs), one process per step, so its times include reading the files.

    /usr/bin/python3 scripts/bench_bpe.py [--vocab-size 2048] [--build build]

Needs python3-regex (scripts/install-deps.sh --fixtures) and a build with tokenize-reference.
Times measured while other programs run on the same cores are noisy: compare CPU times.
"""
import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

try:
    import regex
except ImportError:
    sys.exit("bench_bpe.py: needs the regex module: apt-get install python3-regex "
             "(scripts/install-deps.sh --fixtures)")

PATTERN = regex.compile(
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
SPECIAL = "<|endoftext|>"


def pieces(text):
    """The ordinary text between special tokens, and the special tokens, in order."""
    for i, part in enumerate(text.split(SPECIAL)):
        if i > 0:
            yield SPECIAL, True
        if part:
            yield part, False


def train(text, vocab_size):
    counts = collections.Counter()
    for piece, special in pieces(text):
        if not special:
            counts.update(PATTERN.findall(piece))
    vocab = [bytes([b]) for b in range(256)]
    words = [list(w.encode("utf-8")) for w in counts]
    word_counts = list(counts.values())
    pair_counts = collections.Counter()
    pair_words = collections.defaultdict(set)
    for w, word in enumerate(words):
        for pair in zip(word, word[1:]):
            pair_counts[pair] += word_counts[w]
            pair_words[pair].add(w)
    merges = []
    while len(vocab) + 1 < vocab_size and pair_counts:
        best = max(pair_counts.items(),
                   key=lambda item: (item[1], vocab[item[0][0]], vocab[item[0][1]]))[0]
        new = len(vocab)
        vocab.append(vocab[best[0]] + vocab[best[1]])
        merges.append((vocab[best[0]], vocab[best[1]]))
        for w in list(pair_words.pop(best, ())):
            word, count = words[w], word_counts[w]
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    merged.append(new)
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            if len(merged) == len(word):
                continue
            for pair in zip(word, word[1:]):
                pair_counts[pair] -= count
                if pair_counts[pair] == 0:
                    del pair_counts[pair]
            for pair in zip(merged, merged[1:]):
                pair_counts[pair] += count
                pair_words[pair].add(w)
            words[w] = merged
    return vocab + [SPECIAL.encode()], merges


def encoder(vocab, merges):
    ids = {token: i for i, token in enumerate(vocab)}
    ranks = {(ids[a], ids[b]): (rank, ids[a + b]) for rank, (a, b) in enumerate(merges)}
    cache = {}

    def encode_pretoken(pretoken):
        if pretoken in cache:
            return cache[pretoken]
        word = list(pretoken.encode("utf-8"))
        while len(word) > 1:
            found = [(ranks[p], p) for p in zip(word, word[1:]) if p in ranks]
            if not found:
                break
            (_, merged_id), best = min(found)
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(merged_id)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            word = out
        cache[pretoken] = word
        return word

    def encode(text):
        out = []
        for piece, special in pieces(text):
            if special:
                out.append(ids[SPECIAL.encode()])
            else:
                for pretoken in PATTERN.findall(piece):
                    out.extend(encode_pretoken(pretoken))
        return out

    return encode


def gpt2_bytes_decoder():
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) +
                 list(range(0xAE, 0x100)))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    return lambda spelling: bytes(table[c] for c in spelling)


def timed(call):
    wall, cpu = time.perf_counter(), time.process_time()
    result = call()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def run_child(args, stdin=None):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    done = subprocess.run(args, stdin=stdin, stdout=subprocess.PIPE, check=True)
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return done.stdout, wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vocab-size", type=int, default=2048)
    parser.add_argument("--build", default="build")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    build = os.path.join(root, args.build)
    engine = os.path.join(build, "bin", "tokenize-reference")
    corpus = os.path.join(build, "corpus", "kjv-train.txt")
    if not os.path.exists(engine):
        sys.exit(f"bench_bpe.py: no {engine}: cmake --build {args.build} --target tokenize-reference")
    if not os.path.exists(corpus):
        subprocess.run([os.path.join(build, "bin", "workbook"), "corpus"], check=True)
    with open(corpus, encoding="utf-8") as f:
        text = f.read()
    size = len(text.encode("utf-8"))

    with tempfile.TemporaryDirectory() as out:
        _, cpp_train_wall, cpp_train_cpu = run_child(
            [engine, "train", "--input", corpus, "--vocab-size", str(args.vocab_size),
             "--special", SPECIAL, "--out", out])
        peak_train_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        with open(corpus, "rb") as stdin:
            ids_text, cpp_encode_wall, cpp_encode_cpu = run_child(
                [engine, "encode", "--tokenizer", out], stdin=stdin)
        cpp_ids = [int(t) for t in ids_text.split()]
        decode = gpt2_bytes_decoder()
        with open(os.path.join(out, "merges.txt"), encoding="utf-8") as f:
            cpp_merges = [tuple(decode(part) for part in line.rstrip("\n").split(" "))
                          for line in f if line.strip() and not line.startswith("#version")]

    (vocab, merges), py_train_wall, py_train_cpu = timed(lambda: train(text, args.vocab_size))
    encode = encoder(vocab, merges)
    py_ids, py_encode_wall, py_encode_cpu = timed(lambda: encode(text))
    py_peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    same_merges = merges == cpp_merges
    same_ids = py_ids == cpp_ids
    print(f"KJV training books: {size} bytes, vocabulary {args.vocab_size}, {len(merges)} merges")
    print(f"merges identical: {same_merges}; token ids identical: {same_ids} "
          f"({len(cpp_ids)} tokens, {size / len(cpp_ids):.3f} bytes per token)")
    print(f"{'':22}{'C++ (tokenize-reference)':>28}{'Python':>22}{'ratio':>10}")
    print(f"{'train, CPU s':22}{cpp_train_cpu:28.2f}{py_train_cpu:22.2f}"
          f"{py_train_cpu / cpp_train_cpu:10.1f}")
    print(f"{'train, wall s':22}{cpp_train_wall:28.2f}{py_train_wall:22.2f}"
          f"{py_train_wall / cpp_train_wall:10.1f}")
    cpp_rate, py_rate = size / 1e6 / cpp_encode_cpu, size / 1e6 / py_encode_cpu
    print(f"{'encode, MB/s of CPU':22}{cpp_rate:28.1f}{py_rate:22.2f}{cpp_rate / py_rate:10.1f}")
    print(f"{'peak RSS, MB':22}{peak_train_kb / 1024:28.1f}{py_peak_kb / 1024:22.1f}")
    print("(C++ times are whole processes: reading the corpus and writing or printing included; "
          "its peak RSS is the larger of its train and encode runs; Python's is this script's, "
          "both trainings' data included)")
    print(json.dumps({"same_merges": same_merges, "same_ids": same_ids,
                      "cpp": {"train_cpu_s": cpp_train_cpu, "train_wall_s": cpp_train_wall,
                              "encode_cpu_s": cpp_encode_cpu, "peak_rss_kb": peak_train_kb},
                      "python": {"train_cpu_s": py_train_cpu, "train_wall_s": py_train_wall,
                                 "encode_cpu_s": py_encode_cpu, "peak_rss_kb": py_peak_kb}}))
    return 0 if same_merges and same_ids else 1


if __name__ == "__main__":
    sys.exit(main())
