#!/usr/bin/env python3
"""Compares nuvec's BPE trainer (src/lm/bpe_trainer.cpp) with Hugging Face `tokenizers`.

Both train a byte-level BPE tokenizer on the same files with the same settings: the Llama-3
split pattern (Isolated), ByteLevel(add_prefix_space=False, use_regex=False), the 256 byte
symbols as initial alphabet, the given special tokens, vocab_size and min_frequency. Files are
read line by line with their line endings by both (tokenizers' train_from_files). The script
then checks that the vocabularies (token -> id), the merges (in order) and the added tokens are
equal, and that both tokenizers give the same ids on the corpus lines.

Run where `tokenizers` is installed and nuvec is built (tests/lm_bpe_trainer_test):
    python3 scripts/check_bpe_trainer.py [FILES...] [--vocab-size 4096] [--min-frequency 2]
        [--special '<|endoftext|>' ...] [--test-binary build/tests/lm_bpe_trainer_test]
Without FILES it uses Debian's fortune corpus (/usr/share/games/fortunes, package `fortunes`).
nuvec's side is the disabled gtest BpeTrainer.DISABLED_ExternalCheck, driven by NUVEC_BPE_CHECK_CONFIG.
Exit status 0 when everything matches, 1 otherwise.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_files():
    files = sorted(
        f for f in glob.glob("/usr/share/games/fortunes/*")
        if os.path.isfile(f) and not os.path.islink(f) and not f.endswith(".dat")
    )
    if not files:
        sys.exit("no FILES given and /usr/share/games/fortunes is empty (apt-get install fortunes)")
    return files


def train_hf(files, args):
    from tokenizers import Tokenizer, Regex, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=args.vocab_size, min_frequency=args.min_frequency,
        special_tokens=args.special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False)
    t0 = time.perf_counter()
    tok.train(files, trainer)
    print(f"tokenizers: trained in {time.perf_counter() - t0:.3f} s")
    return tok, json.loads(tok.to_str())


def train_nuvec(files, args, tmp):
    out = os.path.join(tmp, "nuvec_tokenizer.json")
    cfg = os.path.join(tmp, "config.json")
    with open(cfg, "w", encoding="utf-8") as f:
        json.dump({"files": [os.path.abspath(p) for p in files], "vocab_size": args.vocab_size,
                   "min_frequency": args.min_frequency, "special_tokens": args.special,
                   "out": out}, f)
    env = dict(os.environ, NUVEC_BPE_CHECK_CONFIG=cfg)
    r = subprocess.run([args.test_binary, "--gtest_also_run_disabled_tests", "--gtest_filter=BpeTrainer.DISABLED_ExternalCheck"], env=env,
                       capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("trained"):
            print("nuvec:", line)
    if r.returncode != 0 or not os.path.exists(out):
        sys.exit(f"{args.test_binary} failed:\n{r.stdout}\n{r.stderr}")
    with open(out, encoding="utf-8") as f:
        return json.load(f)


def merges_of(j):
    # tokenizers < 0.20 writes "a b", later versions ["a", "b"].
    return [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in j["model"]["merges"]]


def added_of(j):
    return [(t["id"], t["content"], t["special"]) for t in j["added_tokens"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--min-frequency", type=int, default=2)
    ap.add_argument("--special", action="append", default=None,
                    help="a special token (repeat; default <|endoftext|>)")
    ap.add_argument("--test-binary", default=os.path.join(ROOT, "build/tests/lm_bpe_trainer_test"))
    args = ap.parse_args()
    if args.special is None:
        args.special = ["<|endoftext|>"]
    files = args.files or default_files()
    print(f"{len(files)} file(s), {sum(os.path.getsize(f) for f in files)} bytes")

    hf_tok, hf = train_hf(files, args)
    with tempfile.TemporaryDirectory() as tmp:
        ours = train_nuvec(files, args, tmp)

    ok = True
    hv, ov = hf["model"]["vocab"], ours["model"]["vocab"]
    if hv != ov:
        ok = False
        only_h = sorted(set(hv) - set(ov), key=hv.get)[:10]
        only_o = sorted(set(ov) - set(hv), key=ov.get)[:10]
        moved = sorted((hv[k], k, ov[k]) for k in set(hv) & set(ov) if hv[k] != ov[k])[:10]
        print(f"vocab differs: sizes {len(hv)} (tokenizers) vs {len(ov)} (nuvec)")
        print("  only in tokenizers:", only_h)
        print("  only in nuvec:     ", only_o)
        print("  different ids (tokenizers id, token, nuvec id):", moved)
    hm, om = merges_of(hf), merges_of(ours)
    if hm != om:
        ok = False
        first = next((i for i, (a, b) in enumerate(zip(hm, om)) if a != b), min(len(hm), len(om)))
        print(f"merges differ: {len(hm)} vs {len(om)}; first difference at rank {first}:")
        print("  tokenizers:", hm[first:first + 5])
        print("  nuvec:     ", om[first:first + 5])
    if added_of(hf) != added_of(ours):
        ok = False
        print("added tokens differ:", added_of(hf), added_of(ours))

    # Same ids on the corpus lines (tokenizers encodes with its own tokenizer; nuvec's
    # tokenizer.json is loaded into tokenizers too, which checks that the file is valid).
    from tokenizers import Tokenizer
    ours_in_hf = Tokenizer.from_str(json.dumps(ours))
    lines = []
    for p in files[:5]:
        with open(p, encoding="utf-8", newline="") as f:
            lines += f.readlines()[:200]
    diff = sum(hf_tok.encode(s).ids != ours_in_hf.encode(s).ids for s in lines)
    if diff:
        ok = False
        print(f"{diff} of {len(lines)} lines encode differently")
    print(f"vocab {len(hv)}, merges {len(hm)}:", "MATCH" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
