"""The Space app (spaces_app/app.py), launched for real on 127.0.0.1: through gradio_client (every
output of the explain endpoint, error messages) and in a headless Chromium (the page renders the
heatmaps after typing a sentence and clicking Explain; screenshot in test-artifacts/)."""

import base64
import contextlib
import html
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import needs_space

pytestmark = needs_space  # the app runs on gradio, the `space` extra

REPO_ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO_ROOT / "test-artifacts"
SENTENCE = "a gorgeous , witty , seductive movie that never quite works ."
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_app(env: dict, log: Path, cwd: Path | None = None):
    """``spaces_app/app.py`` in a subprocess on a free 127.0.0.1 port, with ``env`` added to the
    (offline) environment; yields its URL once the page answers, stops it afterwards."""
    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port),
           "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", **env}
    with open(log, "w") as out:
        process = subprocess.Popen([sys.executable, str(REPO_ROOT / "spaces_app" / "app.py")], env=env,
                                   stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.time() + 180
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            pass
        if process.poll() is not None or time.time() > deadline:
            process.kill()
            pytest.fail(f"the app did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
    try:
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def default_app_env(model_dir: str) -> dict:
    """The app as a Space operator starts it: one allowed model (``HF_ATTN_MODEL``), nothing else."""
    return {"HF_ATTN_MODEL": model_dir, "HF_ATTN_MODELS": "", "HF_ATTN_ALLOW_ANY_MODEL": ""}


@pytest.fixture(scope="module")
def app_url(trained_model_dir, tmp_path_factory):
    with running_app(default_app_env(trained_model_dir), tmp_path_factory.mktemp("app") / "app.log") as url:
        yield url


@pytest.fixture(scope="module")
def client(app_url):
    from gradio_client import Client

    return Client(app_url, verbose=False)


def test_explain_endpoint_every_output(client, trained_model_dir):
    from transformers import AutoTokenizer

    from hf_attn import AttnClassifierForSequenceClassification
    from hf_attn.app.space import explain_sentence

    label, summary, heatmaps, plot, values = client.predict(
        trained_model_dir, SENTENCE, 0.01, 500, 0, api_name="/explain")
    model = AttnClassifierForSequenceClassification.from_pretrained(trained_model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(trained_model_dir)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the app: identical numerics
    try:
        expected = explain_sentence(model, tokenizer, SENTENCE)
    finally:
        torch.set_num_threads(threads)
    # prediction
    assert label["label"] == expected.label_names[expected.predicted]
    confidences = {c["label"]: c["confidence"] for c in label["confidences"]}
    for name, p in zip(expected.label_names, expected.probabilities):
        assert confidences[name] == pytest.approx(p, abs=1e-6)
    # summary and heatmaps
    assert f"Prediction: {label['label']}" in summary and "JSD" in summary and "median Δŷ" in summary
    assert "Kendall τ" in summary and "Seconds" not in summary
    assert heatmaps.count('class="hfa-cell"') == 6 * len(expected.tokens)  # integrated gradients included
    np.testing.assert_allclose(values["ig"], expected.ig, rtol=1e-6, atol=1e-9)
    for word, unknown in zip(expected.typed, expected.unknown):  # the words as typed, unknown ones marked
        assert (f'<span class="hfa-unk">{html.escape(word)}</span></th>' if unknown
                else f">{html.escape(word)}</th>") in heatmaps
    # permutation plot: a real rendered matplotlib image
    assert plot["type"] == "matplotlib"
    image = base64.b64decode(plot["plot"].split(",", 1)[1])
    assert image[:4] == b"RIFF" and len(image) > 2000
    # all values
    assert values["tokens"] == expected.tokens and values["typed"] == expected.typed
    for pair, result in expected.kendall.items():
        assert values["kendall"][pair]["tau"] == pytest.approx(result["tau"], abs=1e-9)
    for key in ("attention", "gradient", "token_probability", "permutation_tvd", "adversary_attention"):
        np.testing.assert_allclose(values[key], getattr(expected, key), atol=1e-6, err_msg=key)
    np.testing.assert_allclose(values["loo"], expected.loo, atol=1e-6)
    assert values["adversary_tvd"] == pytest.approx(expected.adversary_tvd, abs=1e-6)
    assert values["adversary_jsd"] == pytest.approx(expected.adversary_jsd, abs=1e-6)


def test_errors_are_clear(client, trained_model_dir):
    from gradio_client.exceptions import AppError

    from hf_attn import AttnClassifierConfig

    limit = AttnClassifierConfig.from_pretrained(trained_model_dir).max_tokens  # the model's limit, the app's
    with pytest.raises(AppError, match="empty"):
        client.predict(trained_model_dir, "  ", 0.01, 500, 0, api_name="/explain")
    with pytest.raises(AppError, match=f"too long: {limit + 1} tokens, the limit is {limit}"):
        client.predict(trained_model_dir, "good " * (limit + 1), 0.01, 500, 0, api_name="/explain")
    with pytest.raises(AppError, match="not offered by this explorer"):  # not on the allow-list
        client.predict("/nonexistent/model", SENTENCE, 0.01, 500, 0, api_name="/explain")
    with pytest.raises(AppError, match=r"eps must be from 0 to 1 \(got 2\)"):
        client.predict(trained_model_dir, SENTENCE, 2, 500, 0, api_name="/explain")
    assert "encoder `lstm`" in client.predict(trained_model_dir, api_name="/load_model")
    with pytest.raises(AppError, match="empty"):  # the method comparison: the same one-line messages
        client.predict(trained_model_dir, "  ", api_name="/compare_methods")
    with pytest.raises(AppError, match=f"too long: {limit + 1} tokens, the limit is {limit}"):
        client.predict(trained_model_dir, "good " * (limit + 1), api_name="/compare_methods")


def _click_when_free(driver, element, timeout: float = 120.0) -> None:
    """Click ``element`` once no overlay covers it: on a loaded machine Gradio's status tracker can still
    cover the page for a while after it renders (the click is retried until it lands, or fails after
    ``timeout`` seconds)."""
    import time

    from selenium.common.exceptions import ElementClickInterceptedException

    deadline = time.monotonic() + timeout
    while True:
        try:
            element.click()
            return
        except ElementClickInterceptedException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                    reason="Chromium/chromedriver not installed (apt-get install chromium chromium-driver)")
def test_app_in_headless_chromium(app_url, trained_model_dir, tmp_path):
    pytest.importorskip("selenium", reason="selenium not installed (pip install selenium)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1500"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.get(app_url)
        wait = WebDriverWait(driver, 120)
        box = wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "#sentence textarea")))
        model = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#model input")))
        # the allowed model, preselected, by its name: the server folder's path never reaches the page
        assert model.get_attribute("value") == "local:" + Path(trained_model_dir).name
        assert trained_model_dir not in driver.page_source
        assert "Serving" in driver.find_element(By.CSS_SELECTOR, "#served-model").text
        box.send_keys(SENTENCE)
        _click_when_free(driver, driver.find_element(By.CSS_SELECTOR, "#explain"))
        heatmap = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#heatmaps #hfa-heatmap")))
        tables = heatmap.find_elements(By.CSS_SELECTOR, "table.hfa-heatmap")  # the sentence may wrap
        tokens = [th.text for th in heatmap.find_elements(By.CSS_SELECTOR, "th.hfa-tok")]
        assert len(tokens) == len(SENTENCE.split())
        for table in tables:
            rows = table.find_elements(By.CSS_SELECTOR, "tr[data-row]")
            assert [r.get_attribute("data-row") for r in rows] == [
                "attention", "gradient", "loo", "adversary_attention", "token_probability", "ig"]
            columns = len(table.find_elements(By.CSS_SELECTOR, "th.hfa-tok"))
            for row in rows:
                cells = row.find_elements(By.CSS_SELECTOR, "td.hfa-cell")
                assert len(cells) == columns and all(c.is_displayed() for c in cells)
        rows = tables[0].find_elements(By.CSS_SELECTOR, "tr[data-row]")
        coloured = {c.value_of_css_property("background-color") for c in rows[0].find_elements(By.TAG_NAME, "td")}
        assert coloured - {"rgba(255, 255, 255, 1)", "rgb(255, 255, 255)"}  # the attention colour is painted
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#permutations img, #permutations svg")))
        assert "Prediction:" in driver.find_element(By.CSS_SELECTOR, "#summary").text
        # every attribution method side by side: one row per method that applies to the BiLSTM
        opener = driver.find_element(By.CSS_SELECTOR, "#compare-methods .label-wrap")
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", opener)
        _click_when_free(driver, opener)
        _click_when_free(driver, wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "#compare"))))
        methods = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#methods #hfa-methods")))
        rows = methods.find_elements(By.CSS_SELECTOR, "tr[data-row]")
        assert [r.get_attribute("data-row") for r in rows] == [
            "attention", "saliency", "gradient_x_input", "integrated_gradients", "leave_one_out"]
        assert all(len(r.find_elements(By.CSS_SELECTOR, "td.hfa-cell")) == len(tokens) for r in rows)
        assert "rollout" in methods.find_element(By.CSS_SELECTOR, "ul.hfa-skipped").text
        ARTIFACTS.mkdir(exist_ok=True)
        driver.execute_script("window.scrollTo(0, 0)")
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(1400, min(max(int(height), 1200), 3000))
        time.sleep(0.5)
        assert driver.save_screenshot(str(ARTIFACTS / "app_chromium.png"))
    finally:
        driver.quit()
