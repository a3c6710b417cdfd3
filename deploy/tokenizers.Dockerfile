# The pools' tokenizer files as a tiny image for the control plane's init container
# (deploy/deployment.yaml copies /models into each replica's own emptyDir). Lay the files out as
# the ConfigMap's `tokenizer:` paths name them, one folder per model holding tokenizer.json and
# tokenizer_config.json (the engines' own files), then build from that folder:
#   tokenizers/Qwen3-8B/{tokenizer.json,tokenizer_config.json}
#   tokenizers/Llama-3.1-8B-Instruct/{tokenizer.json,tokenizer_config.json}
#   docker build -f deploy/tokenizers.Dockerfile -t ghcr.io/<you>/kvroute-tokenizers:0.1.0 tokenizers/
# The init container runs `cp`, so the base needs a shell toolbox; busybox is the smallest.
FROM busybox:1.37
COPY . /models/
