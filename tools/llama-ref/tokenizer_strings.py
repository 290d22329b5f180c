#!/usr/bin/env python3
# tokenizer_strings.py - the strings of tests/fixtures/vocab/ggml-vocab-llama-bpe.gguf.inp:
# the gpt-2 fixture's strings, then code, numbers, CJK, emoji, runs of white space,
# contractions in every case, mixed scripts; each followed by "\n__ggml_vocab_test__\n"
# (the format of llama.cpp's tokenizer fixtures). Deterministic: no randomness.
#
#   python3 tools/llama-ref/tokenizer_strings.py tests/fixtures/vocab/ggml-vocab-gpt-2.gguf.inp > OUT.inp
import sys

SEP = "\n__ggml_vocab_test__\n"

def fixture_strings(path):
    text = open(path, encoding="utf-8").read()
    return text.split(SEP)[:-1]

def ours():
    s = []
    # numbers: Llama 3 cuts digit runs into threes from the left
    for n in range(1, 13):
        s.append("1234567890123"[:n])
    s += ["3.14159", "-42", "+7", "1,000,000", "1e-9", "0x1F", "v1.2.3", "2024-06-30", "12:34:56",
          "$1,299.99", "50%", "１２３４", "٣٤٥٦٧", "१२३४५", "ⅫⅣ", "²³", "a1b22c333d4444", " 12345 678"]
    # contractions in every case, and near misses
    for c in ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]:
        s += ["it" + c, "IT" + c.upper(), "It" + c[0] + c[1:].capitalize(), "x" + c + "x"]
    s += ["don't", "DON'T", "rock 'n' roll", "'''", "'", "''s", "o'clock", "y'all'd've"]
    # code
    s += ["def f(x):\n    return x**2", "int main(void) { return 0; }", "for (int i = 0; i < n; i++) {",
          "#include <stdio.h>", "x += 1;", "a->b->c", "if (a && b || !c)", "std::vector<int> v;",
          "let s = `hello ${name}`;", "SELECT * FROM t WHERE id = 42;", "<div class=\"a\">b</div>",
          "{\"key\": [1, 2, 3]}", "print('hi')  # comment", "\tindented\n\t\tmore", "a_b_c __init__ CamelCase",
          "http://example.com/a?b=c&d=e", "user@example.org", "C:\\Windows\\System32", "~/.bashrc", "$HOME/bin",
          "x = y if z else w", "λx.x", "fn main() -> Result<(), Box<dyn Error>> {}", "@decorator", "`code`",
          "```python\nprint(1)\n```", "i++; j--;", "0b1010 & 0xFF", "<<<>>>", "!== ===", "....", "---", "***bold***"]
    # CJK and other scripts
    s += ["你好", "你好，世界！", "我爱北京天安门。", "機械学習は面白い", "ひらがなカタカナ", "한국어 텍스트",
          "中文English混合", "日本語とEnglish", "Привет, мир!", "Ελληνικά", "עברית", "العربية", "हिन्दी",
          "ภาษาไทย", "Tiếng Việt", "Ñandú café naïve", "Straße", "ﬁ ligature", "e\u0301 combining", "Å Å",
          "ıİ", "ǅ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "ⓐⓑⓒ", "™©®", "€£¥₹", "½ ¼", "‘quotes’ “double”", "—dash–", "…"]
    # emoji
    s += ["🙂", "🙂🙂🙂", "👍🏽", "👨‍👩‍👧‍👦", "🇯🇵🇫🇷", "❤️", "hi 😀 there", "🦙 llama", "🤖🧠", "✨new✨", "1️⃣"]
    # white space
    for w in [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", " \n", "\n ",
              "  \n  ", "\t \n", "\u00a0", "\u3000", "\u2003"]:
        s += [w, "a" + w + "b", w + "x", "x" + w]
    s += ["trailing   ", "   leading", "mid    dle", "tabs\tand\tspaces  ", "line1\nline2\n", "para\n\n\npara",
          "end.\n\nNext", "x  \n  y", "a\r\n\r\nb"]
    # punctuation and mixed
    s += ["Hello, world!", "hello.world", ".net", "e.g.", "U.S.A.", "(parenthesis)", "[bracket]", "{brace}",
          "?!?!", "¿Qué?", "¡Hola!", "a/b\\c|d", "#hashtag", "@mention", "semi;colon:", "x^2+y^2=z^2",
          "HELLO WORLD", "hello WORLD Hello", "ALLCAPS'S", "MiXeD CaSe", "a", "A", "ab", "  a  ", "  ,", ", ,",
          "The quick brown fox jumps over the lazy dog.", "Lorem ipsum dolor sit amet, consectetur adipiscing elit.",
          "It's 5 o'clock somewhere: 12:00 PM, 3 cats & 42 dogs!", "Tokenizers split text into pieces first.",
          "naïve résumé coöperate", "über-cool", "state-of-the-art", "re-enter", "e-mail", "X-ray",
          "<|begin_of_text|>", "<|eot_id|> not special here", "<s> </s>", "[INST] hi [/INST]"]
    return s

def main():
    strings = fixture_strings(sys.argv[1]) + ours()
    sys.stdout.write("".join(x + SEP for x in strings))
    sys.stderr.write("%d strings\n" % len(strings))

main()
