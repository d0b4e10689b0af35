"""Put this directory on an SGLang server's PYTHONPATH (see sitecustomize.py). A package only so that it ships
in the wheel with its sitecustomize.py."""
