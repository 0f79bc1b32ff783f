"""Fashion-MNIST for the examples: the idx reader, the train/test tensors and the two models.

Debian's dataset-fashion-mnist ships the four gzipped idx files under
/usr/share/datasets/fashion-mnist (60,000 training and 10,000 test 28x28 greyscale images, 10
classes); nothing is downloaded. Images stay uint8 in memory (47 MB for the whole training set,
shared by nothing: every rank holds its own copy) and become normalised float32 one batch at a
time (`as_input`).

Models (`make_model`):
  vgg       (default) VGG-style: two blocks of two 3x3 convolutions (16 then 32 channels, ReLU,
            2x2 max-pool), then dense 1568 -> 2048 -> 10. 3.25 M parameters, 99% of them in the
            dense layers, so a step sends 13 MB of fp32 gradients while its compute stays small
            (~8 M multiply-adds per image): as in VGG16, whose classifier holds 124 of its 138 M
            parameters, the gradient is large against the compute and the exchange, not the
            2 shared CPU cores, decides the step time on a 1 Gbit/s link.
  resnet18  torchvision's ResNet-18 with a 3x3 stride-1 single-channel stem and no max-pool
            (11.2 M parameters, all convolutional): ~0.55 G multiply-adds per image, ~70 times
            the vgg net's, so on CPUs it is compute-bound and compression changes little.

This module does not import gravac: bench/e2e/ddp_peer.py trains the same models on the same
data with torch.distributed alone.
"""

import gzip
import os
import time

import numpy as np
import torch

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
FILES = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
         "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}
CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
           "Bag", "Ankle boot")
# Mean and standard deviation of the 60,000 training images' pixels scaled to [0, 1].
PIXEL_MEAN, PIXEL_STD = 0.2860, 0.3530
IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
             0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def read_idx(path):
    """The array in an idx file (gzipped when the name ends in .gz). ValueError when the file is
    not idx or its size does not match its header."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in IDX_TYPES:
        raise ValueError("%s: not an idx file (magic %r)" % (path, data[:4]))
    dtype, ndim = np.dtype(IDX_TYPES[data[2]]), data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError("%s: truncated header (%d dims)" % (path, ndim))
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - header != expected:
        raise ValueError("%s: %d data bytes, the header %s needs %d"
                         % (path, len(data) - header, shape, expected))
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)


def load_split(split, data_dir=DEFAULT_DIR):
    """(images uint8 [n, 1, 28, 28], labels int64 [n]) of split 'train' or 'test'."""
    images_file, labels_file = FILES[split]
    paths = [os.path.join(data_dir, f) for f in (images_file, labels_file)]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise FileNotFoundError("Fashion-MNIST files missing: %s (Debian: apt-get install "
                                "dataset-fashion-mnist, or pass --data-dir)" % ", ".join(missing))
    images, labels = read_idx(paths[0]), read_idx(paths[1])
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise ValueError("%s: images %s and labels %s do not match"
                         % (data_dir, images.shape, labels.shape))
    return (torch.from_numpy(images.copy()).unsqueeze(1),
            torch.from_numpy(labels.astype(np.int64)))


def load_data(seed, train_size=60000, test_size=10000, data_dir=DEFAULT_DIR):
    """(x_train, y_train, x_test, y_test), images uint8: train_size training images drawn with
    `seed` (the whole set when 60000) and the first test_size test images (fixed, so every seed
    is scored on the same images)."""
    x_train, y_train = load_split("train", data_dir)
    x_test, y_test = load_split("test", data_dir)
    if not 0 < train_size <= len(x_train) or not 0 < test_size <= len(x_test):
        raise ValueError("train_size %d / test_size %d out of range (%d / %d)"
                         % (train_size, test_size, len(x_train), len(x_test)))
    if train_size < len(x_train):
        keep = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(seed))
        keep = keep[:train_size]
        x_train, y_train = x_train[keep], y_train[keep]
    return x_train, y_train, x_test[:test_size], y_test[:test_size]


def as_input(images):
    """Normalised float32 model input of uint8 images."""
    return (images.float() / 255.0 - PIXEL_MEAN) / PIXEL_STD


def make_vgg():
    def block(cin, cout):
        return [torch.nn.Conv2d(cin, cout, 3, padding=1), torch.nn.ReLU(),
                torch.nn.Conv2d(cout, cout, 3, padding=1), torch.nn.ReLU(),
                torch.nn.MaxPool2d(2)]
    return torch.nn.Sequential(*block(1, 16), *block(16, 32), torch.nn.Flatten(),
                               torch.nn.Linear(32 * 7 * 7, 2048), torch.nn.ReLU(),
                               torch.nn.Linear(2048, 10))


def make_resnet18():
    import torchvision
    model = torchvision.models.resnet18(num_classes=10)
    model.conv1 = torch.nn.Conv2d(1, 64, 3, stride=1, padding=1, bias=False)
    model.maxpool = torch.nn.Identity()
    return model


MODELS = {"vgg": make_vgg, "resnet18": make_resnet18}


def make_model(name):
    if name not in MODELS:
        raise ValueError("unknown model %r (known: %s)" % (name, ", ".join(MODELS)))
    return MODELS[name]()


def evaluate_shard(model, x, y, batch=500):
    """(summed loss, correct, count) of the model on images x (uint8), labels y. Each rank scores
    its own shard; the caller sums the three over the ranks."""
    model.eval()
    loss, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            logits = model(as_input(x[i:i + batch]))
            loss += torch.nn.functional.cross_entropy(logits, y[i:i + batch],
                                                      reduction="sum").item()
            correct += int((logits.argmax(1) == y[i:i + batch]).sum())
    model.train()
    return loss, correct, len(x)


class ScoringClock:
    """Training time with the held-out scoring left out, for a time-to-accuracy measured more
    often than once per epoch (--score-every): every score costs the same forward passes in every
    run, so counting them would add the same seconds to each run's time and blur their ratios.
    `training_s()` is the time since the clock was made less every `score(...)` call so far."""

    def __init__(self):
        self.start = time.monotonic()
        self.scoring_s = 0.0

    def training_s(self):
        return time.monotonic() - self.start - self.scoring_s

    def score(self, fn):
        """fn()'s result; the time it took is not training time."""
        t = time.monotonic()
        try:
            return fn()
        finally:
            self.scoring_s += time.monotonic() - t


def score_due(step, steps_per_epoch, every):
    """Whether the global step `step` (1-based, just finished) is scored mid-epoch: every
    `every` steps (0: never), except at an epoch's end, which is scored anyway."""
    return every > 0 and step % every == 0 and step % steps_per_epoch != 0


def score_record(epoch, step, training_s, accuracy):
    """The JSON line of one held-out score (train_fashion.py and ddp_peer.py write the same)."""
    return {"kind": "score", "epoch": epoch, "step": step,
            "train_time_s": round(training_s, 3), "test_accuracy": accuracy}
