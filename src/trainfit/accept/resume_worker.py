"""Fresh process for the resume check: ``python -m trainfit.accept.resume_worker MODEL OUT CKPT RESULT [DEVICE [ENGINE]]``."""

import sys
from pathlib import Path


def main(model_dir: str, out_dir: str, ckpt: str, result: str, device: str = "cpu", engine: str = "hf") -> None:
    import torch

    torch.set_num_threads(1)
    from trainfit.accept.train import RunSettings, build_trainer

    trainer, _, _ = build_trainer(RunSettings(model_dir=Path(model_dir), output_dir=Path(out_dir), device=device, engine=engine))
    trainer.train(resume_from_checkpoint=ckpt)
    torch.save({n: p.detach().cpu() for n, p in trainer.model.named_parameters()}, result)


if __name__ == "__main__":
    main(*sys.argv[1:7])
