"""The serve page leaves the vLLM memory fraction empty by default and then sends none, so the card resolves the
framework's default for the placement (methods.presets.default_gpu_memory_utilization: TRL colocate 0.3, trl
vllm-serve 0.9) rather than always stating TRL's colocate 0.3."""

import re

from trainfit.serve.page import SCRIPT, index_html


def test_gmu_input_is_empty_and_only_sent_when_set():
    [tag] = re.findall(r'<input[^>]*id="gmu"[^>]*>', index_html())
    assert 'value=""' in tag
    assert "gpu_memory_utilization: num('gmu')" not in SCRIPT
    assert "if (num('gmu') !== '') c.rollout.gpu_memory_utilization = num('gmu');" in SCRIPT
