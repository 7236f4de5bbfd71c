"""Programs whose output under neuronemu still differs from CPython's, each with what
neuronemu does instead; their tests are strict expected failures (fixing one fails its test
until its entry goes). docs/limitations.md lists them."""

KNOWN_DIFFERENCES: dict[str, str] = {
    # Not fixed yet.
}
