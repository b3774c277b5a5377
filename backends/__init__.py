"""Model backends behind one protocol (:class:`~vista_distill.pipeline.protocol.Backend`): in-process
transformers, OpenAI-compatible servers, human labels, and the wrappers (call cache, self-consistency)."""
