"""Model folders loaded with ``trust_remote_code=True`` in a fresh interpreter where ``hf_attn``
cannot be imported (what a Hub user without the package gets)."""

import os
import subprocess
import sys
import textwrap

import torch

BLOCK_HF_ATTN = textwrap.dedent("""
    import importlib.abc, sys
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "hf_attn" or name.startswith("hf_attn."):
                raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
    sys.meta_path.insert(0, Block())
""")


def remote_code_logits(folder, inputs: dict, workdir) -> torch.Tensor:
    """Logits of ``AutoModelForSequenceClassification.from_pretrained(folder,
    trust_remote_code=True)(**inputs)`` computed in a subprocess without ``hf_attn``."""
    inputs_path, logits_path = os.path.join(workdir, "inputs.pt"), os.path.join(workdir, "logits.pt")
    torch.save(inputs, inputs_path)
    # The caller's thread count: bitwise equality holds only when the sums are split the same way.
    script = BLOCK_HF_ATTN + textwrap.dedent(f"""
        import torch
        torch.set_num_threads({torch.get_num_threads()})
        from transformers import AutoModelForSequenceClassification
        try:
            import hf_attn
            raise SystemExit("hf_attn is importable")
        except ModuleNotFoundError:
            pass
        model = AutoModelForSequenceClassification.from_pretrained({str(folder)!r}, trust_remote_code=True)
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        inputs = torch.load({inputs_path!r})
        with torch.no_grad():
            logits = model(**inputs).logits
        torch.save(logits, {logits_path!r})
    """)
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_MODULES_CACHE=os.path.join(workdir, "modules"))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                            cwd=workdir, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return torch.load(logits_path)
