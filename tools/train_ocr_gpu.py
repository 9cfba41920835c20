"""Fine-tune the whole OCR reader (english_g2 CNN + BiLSTM + our decoder) on a GPU.

Run by hand (never by CI), on a machine with CUDA and many cores, starting from a
model folder written by ``train_ocr.py`` / ``save_pretrained`` (e.g. ``assets/ocr``):

    OCR_FONTS_MANIFEST=fonts.json OCR_FONT_ROOT=/tmp/fonts OCR_WORDS=words \\
    python3 tools/train_ocr_gpu.py --init assets/ocr --out /tmp/run --minutes 20

Unlike ``train_ocr.py`` (CPU: the CNN stays frozen and its features are computed by
worker processes), here the DataLoader workers only render lines (Pillow) and the GPU
runs the whole model, so the CNN is fine-tuned too — at ``--encoder-lr-mult`` x the
decoder's learning rate, with its BatchNorm statistics frozen (english_g2's). Loss:
label-smoothed cross-entropy of the decoder + ``--ctc-weight`` x CTC on english_g2's
CTC head (hybrid CTC/attention, Watanabe et al. 2017), which keeps the CTC reading of
the tuned encoder valid. Schedule: linear warm-up, cosine decay over ``--minutes`` of
wall-clock time (Loshchilov & Hutter 2017). Mixed precision: TF32 matmuls/convolutions.

Every ``--eval-every`` minutes the model reads the held-out-font evaluation sets (clean
and degraded, ``ocr_data.CLEAN`` / ``ocr_data.DEGRADED``, rendered once with fixed
seeds) by greedy decoding; the best mean CER is written to ``OUT/best`` (the layout of
``assets/ocr``, float16) and each evaluation appended to ``OUT/eval.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from core.backends.ocr_attn import OCRVocab, ctc_greedy_decode, num_columns  # noqa: E402
from core.backends.ocr_checkpoint import load_pretrained, save_pretrained  # noqa: E402
from tools.train_ocr import cer, sequence_modeling_packed, text_targets, visual_features  # noqa: E402

log = logging.getLogger("train_ocr_gpu")


class LineBatches(torch.utils.data.IterableDataset):
    """Endless batches of rendered training lines (training fonts only).

    Each worker renders ``4 * batch`` lines, sorts them by width and yields them as
    batches: pixel_values float32 (B, 1, 64, W_max) in [-1, 1] (EasyOCR's
    ``NormalizePAD``), widths int64 (B,), texts list[str].
    """

    def __init__(self, batch: int, seed: int, p_heavy: float):
        self.batch, self.seed, self.p_heavy = batch, seed, p_heavy

    def __iter__(self):
        from tools import ocr_data

        info = torch.utils.data.get_worker_info()
        wid = info.id if info is not None else 0
        rng = random.Random(self.seed * 1000 + wid)
        train_fonts, _ = ocr_data.split_fonts(ocr_data.list_fonts())
        while True:
            samples = []
            for _ in range(4 * self.batch):
                font = rng.choice(train_fonts)
                text = ocr_data.random_text(rng, euro=font.has_euro)
                aug = ocr_data.TRAIN_HEAVY if rng.random() < self.p_heavy else ocr_data.TRAIN_AUG
                samples.append((ocr_data.render_line(text, font, rng, aug), text))
            samples.sort(key=lambda s: s[0].width)
            chunks = [samples[i : i + self.batch] for i in range(0, len(samples), self.batch)]
            rng.shuffle(chunks)
            for chunk in chunks:
                px, widths = ocr_data.to_pixel_values([im for im, _ in chunk])
                yield torch.from_numpy(px), torch.from_numpy(widths), [t for _, t in chunk]


def encode_batch(model, px: torch.Tensor, widths: torch.Tensor):
    """CNN, then the two BiLSTMs on each row's own columns (``train_ocr``'s helpers):
    columns float32 (B, S, 256) (zeros past each row's length) and lengths int64 (B,) on
    the model's device."""
    vis = visual_features(model.encoder, px)
    lengths = num_columns(widths).clamp(1, vis.shape[1])
    cols = sequence_modeling_packed(model.encoder, vis, lengths)
    return cols, lengths.to(cols.device)


def eval_sets(n: int) -> dict:
    """Held-out-font lines: {"clean"|"degraded": [(image, text)]} (fixed seeds)."""
    from tools import ocr_data

    _, held = ocr_data.split_fonts(ocr_data.list_fonts())
    return {name: ocr_data.make_samples(n, held, seed, aug)
            for name, aug, seed in (("clean", ocr_data.CLEAN, 1001), ("degraded", ocr_data.DEGRADED, 2002))}


@torch.no_grad()
def evaluate(model, vocab: OCRVocab, sets: dict, device, batch: int = 100) -> dict:
    """Greedy attention reading and CTC reading CER per set."""
    from tools import ocr_data

    model.eval()
    res = {}
    for name, samples in sets.items():
        order = sorted(range(len(samples)), key=lambda i: samples[i][0].width)
        hyps, ctc_hyps, refs = [], [], []
        for i in range(0, len(order), batch):
            chunk = [samples[k] for k in order[i : i + batch]]
            px, widths = ocr_data.to_pixel_values([im for im, _ in chunk])
            px, widths = torch.from_numpy(px).to(device), torch.from_numpy(widths)
            cols, lengths = encode_batch(model, px, widths)
            pad = (torch.arange(cols.shape[1], device=device)[None, :] >= lengths[:, None])[..., None]
            ctc_hyps += ctc_greedy_decode(model.encoder.ctc_logits(cols).masked_fill(pad, 0.0).cpu())
            memory, mask = model.memory_from_columns(cols, lengths)
            hyps += [vocab.decode(row) for row in model.greedy_ids(memory, mask)]
            refs += [t for _, t in chunk]
        res[f"{name}_cer"] = cer(hyps, refs)
        res[f"{name}_ctc_cer"] = cer(ctc_hyps, refs)
        res[f"{name}_exact"] = sum(h == r for h, r in zip(hyps, refs)) / len(refs)
        res[f"{name}_examples"] = [(r, h) for r, h in zip(refs, hyps) if r != h][:3]
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--init", required=True, type=Path, help="model folder to start from (assets/ocr layout)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--minutes", type=float, default=20.0, help="wall-clock training budget (schedule length)")
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: no limit; smoke tests)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--workers", type=int, default=14)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--encoder-lr-mult", type=float, default=0.3, help="CNN + BiLSTM + CTC head lr / decoder lr")
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--ctc-weight", type=float, default=0.2)
    ap.add_argument("--p-heavy", type=float, default=0.4, help="share of lines with all degradations (TRAIN_HEAVY)")
    ap.add_argument("--eval-lines", type=int, default=300)
    ap.add_argument("--eval-every", type=float, default=3.0, help="minutes")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)

    args.out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                        handlers=[logging.StreamHandler(sys.stdout), logging.FileHandler(args.out / "train.log")])
    log.info("args: %s", vars(args))
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = False  # widths vary every batch
    device = torch.device(args.device)
    model, vocab = load_pretrained(args.init, device)
    dec_params = [p for n, p in model.named_parameters() if not n.startswith("encoder.")]
    enc_params = list(model.encoder.parameters())
    for p in model.parameters():
        p.requires_grad_(True)
    opt = torch.optim.AdamW([{"params": dec_params}, {"params": enc_params, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.98), weight_decay=args.weight_decay)
    t0 = time.time()
    sets = eval_sets(args.eval_lines)
    log.info("evaluation sets rendered in %.1f s", time.time() - t0)
    loader = torch.utils.data.DataLoader(LineBatches(args.batch, args.seed, args.p_heavy), batch_size=None,
                                         num_workers=args.workers, prefetch_factor=4 if args.workers else None,
                                         persistent_workers=bool(args.workers), pin_memory=device.type == "cuda")
    best = None
    history = []

    def run_eval(step: int, minutes: float) -> None:
        nonlocal best
        t = time.time()
        res = evaluate(model, vocab, sets, device)
        score = (res["clean_cer"] + res["degraded_cer"]) / 2
        row = {k: v for k, v in res.items() if not k.endswith("examples")}
        row.update(step=step, minutes=round(minutes, 2), score=score)
        history.append(row)
        with open(args.out / "eval.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        log.info("EVAL step %d (%.1f min): CER clean %.4f degraded %.4f | exact clean %.3f degraded %.3f | "
                 "CTC clean %.4f degraded %.4f | %.1f s", step, minutes, res["clean_cer"], res["degraded_cer"],
                 res["clean_exact"], res["degraded_exact"], res["clean_ctc_cer"], res["degraded_ctc_cer"],
                 time.time() - t)
        for r, h in res["clean_examples"][:2] + res["degraded_examples"][:2]:
            log.info("   ref %r  hyp %r", r, h)
        if best is None or score < best["score"]:
            best = row
            save_pretrained(model, args.out / "best")
            (args.out / "best" / "metrics.json").write_text(json.dumps(row, indent=2) + "\n")
            log.info("   new best (score %.4f) written to %s", score, args.out / "best")

    stop = {"flag": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(flag=True))
    run_eval(0, 0.0)
    budget = args.minutes * 60
    t_start = time.time()
    last_eval = t_start
    t_log, n_log = time.time(), 0
    step = 0
    for px, widths, texts in loader:
        elapsed = time.time() - t_start
        if stop["flag"] or elapsed >= budget or (args.steps and step >= args.steps):
            break
        progress = elapsed / budget
        f = min(1.0, (step + 1) / args.warmup) * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * progress)))
        opt.param_groups[0]["lr"] = args.lr * f
        opt.param_groups[1]["lr"] = args.lr * args.encoder_lr_mult * f
        model.train()
        model.encoder.FeatureExtraction.eval()  # BatchNorm statistics stay english_g2's
        px = px.to(device, non_blocking=True)
        inp, tgt, ctc_t, ctc_len = (t.to(device) for t in text_targets(texts, vocab))
        cols, lengths = encode_batch(model, px, widths)
        memory, mask = model.memory_from_columns(cols, lengths)
        logits, _, _ = model.decode_step(inp, model.init_cache(memory, mask))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=OCRVocab.PAD,
                               label_smoothing=args.label_smoothing)
        ce = loss.detach()
        if args.ctc_weight > 0:
            lp = model.encoder.ctc_logits(cols).log_softmax(-1).transpose(0, 1)
            ctc = F.ctc_loss(lp.float(), ctc_t, lengths, ctc_len, blank=0, zero_infinity=True)
            loss = loss + args.ctc_weight * ctc
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        n_log += len(texts)
        if step % args.log_every == 0:
            dt = time.time() - t_log
            log.info("step %d | %.1f min | lr %.2e | CE %.3f | %.1f steps/s, %.0f lines/s", step, elapsed / 60,
                     opt.param_groups[0]["lr"], ce.item(), args.log_every / dt, n_log / dt)
            t_log, n_log = time.time(), 0
        if time.time() - last_eval >= args.eval_every * 60:
            run_eval(step, (time.time() - t_start) / 60)
            last_eval = time.time()
    run_eval(step, (time.time() - t_start) / 60)
    log.info("done: %d steps in %.1f min; best %s", step, (time.time() - t_start) / 60, best)
    return 0


if __name__ == "__main__":
    sys.exit(main())
