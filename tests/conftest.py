import os

# Tests never reach the Hugging Face hub; resolution must fall back to the catalog and local files.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
