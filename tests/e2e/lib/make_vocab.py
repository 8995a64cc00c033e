# make_vocab.py OUT.gguf - a tiny SentencePiece ("llama") vocabulary GGUF
# whose token 0 is an ordinary token with a 300-byte text ("Ü" x 150).
# With `make-model --constant-output` (greedy emits token 0 forever) it
# gives a model whose every generated token is longer than any fixed
# 256-byte buffer. Written with the standard library (GGUF v3, no tensors).
import struct
import sys

LONG = "\u00dc" * 150  # 300 bytes of UTF-8
tokens = [LONG, "<unk>", "<s>", "</s>", "\u2581"] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["\u2581a"]
types = [1, 2, 3, 3] + [1] * (len(tokens) - 4)


def s(x):
    b = x.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


kv = []
kv.append(s("general.architecture") + struct.pack("<I", 8) + s("llama"))
kv.append(s("tokenizer.ggml.model") + struct.pack("<I", 8) + s("llama"))
kv.append(s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, len(tokens)) + b"".join(s(t) for t in tokens))
kv.append(s("tokenizer.ggml.token_type") + struct.pack("<IIQ", 9, 5, len(types)) +
          b"".join(struct.pack("<i", t) for t in types))
kv.append(s("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, len(tokens)) +
          b"".join(struct.pack("<f", -float(i)) for i in range(len(tokens))))
for key, val in (("unknown_token_id", 1), ("bos_token_id", 2), ("eos_token_id", 3)):
    kv.append(s("tokenizer.ggml." + key) + struct.pack("<II", 4, val))
with open(sys.argv[1], "wb") as f:
    f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv)) + b"".join(kv))
