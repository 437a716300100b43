"""The built-in local model (llama-server with Gemma 3 270M)."""

from rolltap.local.model import LOCAL_MODEL_NAME, LocalModel, LocalModelError

__all__ = ["LOCAL_MODEL_NAME", "LocalModel", "LocalModelError"]
