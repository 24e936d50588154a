"""Demo agents that run offline on the embedded model (``toolwire.demo.support_desk``)."""
