"""Random-but-realistic tokenizer files for random-weight test checkpoints.

A random-weight Pocket TTS checkpoint still needs a tokenizer the official
package accepts: ``pocket_tts.modules.text_conditioner.SentencePieceTokenizer``
loads a SentencePiece ``.model`` file and ``JsonTokenizer`` a HuggingFace
``tokenizers`` JSON file, and both assert that the vocabulary has exactly
``n_bins`` entries (4000 in every released config).

The files written here come from a real SentencePiece unigram model trained on
a synthetic, multilingual corpus generated deterministically from a seed, so
they tokenize text the way a real model would: word-start pieces (``▁the``),
sub-words, digits, decimals, abbreviations, accented Latin letters, curly
quotes and the punctuation the official text chunker looks for.

Properties (checked by ``tests/pocket/test_tokenizer_files.py``):

* ``sp.vocab_size() == vocab_size`` and ``get_vocab_size() == vocab_size``.
* Id 0 is ``<unk>``; there are no BOS/EOS/PAD pieces (Pocket TTS never uses
  them), so every other id is an ordinary piece.
* Normalization is SentencePiece's ``nmt_nfkc`` (``…`` becomes ``...``, a
  no-break space becomes a space), with ``remove_extra_whitespaces=False``:
  every extra space is one more ``▁`` token, which is what the official
  ``pad_with_spaces_for_short_inputs`` option relies on. Digits are split
  (``1999`` → ``1 9 9 9``).
* ``. ! ? , ; :`` are user-defined pieces: always a piece of their own, never
  merged with a letter, a digit, a space or a quote. So ``.!...?`` encodes as
  ``[▁, ., !, ., ., ., ?]`` and ``,;:`` as ``[▁, ,, ;, :]`` (a lone word-start
  piece, then one piece per mark): the official chunker drops the first token
  of ``tokenizer(".!...?")`` and ``tokenizer(",;:")`` and uses the rest as its
  sentence and fallback boundary tokens. The trainer checks this and raises
  ``RuntimeError`` if a sentencepiece version ever broke it.
* The JSON tokenizer is a conversion of the SentencePiece model (same pieces,
  ids, scores and normalization map): both give the same ids and the same
  decoded text (checked on tens of thousands of strings, including random
  punctuation soup, leading/trailing/multiple spaces and unknown characters).
  The one exception is an exact tie: a run of three or more identical letters
  such as ``sss`` when ``ss`` is a piece, where ``s+ss`` and ``ss+s`` score the
  same and the two libraries' float rounding may pick differently (the same
  caveat holds for any SentencePiece model converted to ``tokenizers``).
* Same seed and vocabulary size → byte-identical files, in any process.
* About one to two seconds to train 4000 pieces; the result is cached per
  ``(vocab_size, seed)`` in the process, so writing both files trains once.
"""

from __future__ import annotations

import functools
import io
import json
import os
import random
import re
import tempfile
from pathlib import Path

from vocalis.errors import InputError

__all__ = [
    "DEFAULT_VOCAB_SIZE",
    "synthetic_corpus",
    "train_sentencepiece",
    "write_sentencepiece_model",
    "write_tokenizers_json",
    "sentencepiece_to_tokenizers_json",
]

DEFAULT_VOCAB_SIZE = 4000

# The punctuation pieces the official chunker looks up. Each one is a piece of
# its own, never merged with a letter, a space or another mark.
_BOUNDARY_MARKS = (".", "!", "?", ",", ";", ":")

# --------------------------------------------------------------------------
# Synthetic corpus
# --------------------------------------------------------------------------

_WORDS = {
    "en": (
        "the of and to in is was that it for on with as he she they we you at by this "
        "from have had not are but or an be one all there their what which when your "
        "can said each about how up out them then many some would other into has more "
        "her two like him see time could no make than first been its who now people "
        "my made over did down only way find use may water long little very after words "
        "called just where most know get through back much before go good new write our "
        "used me man too any day same right look think also around another came come work "
        "three word must because does part even place well such here take why things help "
        "put years different away again off went old number great tell men say small every "
        "found still between name should home big give air line set own under read last "
        "never us left end along while might next sound below saw something thought both "
        "few those always looked show large often together asked house world going want "
        "school important until form food keep children feet land side without boy once "
        "animals life enough took sometimes four head above kind began almost live page "
        "got earth need far hand high year mother light parts country father let night "
        "following picture being study second eyes soon times story boys since white days "
        "ever paper hard near sentence better best across during today others however sure "
        "means knew try told young miles sun ways thing whole hear example heard several "
        "change answer room sea against top turned learn point city play toward five using "
        "himself usually money seen car morning given friends voice river weather quietly "
        "hello yes really okay please thank thanks sorry maybe costs says isn't"
    ),
    "fr": (
        "le la les de des du un une et est en que qui dans pour pas au aux sur avec il "
        "elle ils nous vous ce cette ces son sa ses leur mais ou plus tout comme fait être "
        "avoir été très bien où même après avant déjà aussi encore toujours jamais rien "
        "chose monde homme femme enfant maison temps jour année fois vie main tête cœur "
        "père mère frère sœur ami amie école ville pays forêt château église rue voiture "
        "français française été hiver printemps automne café thé pâte crème naïve noël "
        "garçon leçon reçu où là voilà déçu élève étudiant première deuxième théâtre "
        "hôpital hôtel fenêtre bâtiment quelqu'un aujourd'hui parce peut-être"
    ),
    "de": (
        "der die das und ist nicht ein eine zu den von mit sich des auf für im dem "
        "auch es an werden aus er hat daß dass sie nach wird bei einer um am sind noch "
        "wie einem über einen so zum war haben nur oder aber vor zur bis mehr durch man "
        "sehr schon wenn können müssen würde möchte größer schön grün über für Mädchen "
        "Straße Fußball Größe Tür Bücher Brücke Bäume Häuser Äpfel Öl Übung weiß heiß "
        "Frühling Mönch Käse Bär Schlüssel Gemüse fröhlich natürlich Geschäft Kühlschrank "
        "Zeit Jahr Mensch Tag Hand Welt Leben Frau Mann Kind Haus Stadt Weg Arbeit"
    ),
    "es": (
        "el la los las de del y que en un una es por con no se su para como más pero "
        "sus le ya o este sí porque esta entre cuando muy sin sobre también me hasta "
        "hay donde quien desde todo nos durante todos uno les ni contra otros ese eso "
        "año años niño niña mañana señor señora España español corazón canción nación "
        "árbol música pájaro teléfono lápiz fácil difícil rápido último público "
        "después además aquí allí así mamá papá está están qué cómo cuándo dónde "
        "pingüino vergüenza camión jardín"
    ),
    "it": (
        "il lo la i gli le di da in con su per tra fra un una uno è e che non più "
        "anche come questo quello molto sono sei siamo siete hanno città perché però "
        "già giù può così caffè università virtù libertà età verità felicità tè "
        "ragazzo ragazza casa giorno notte amico amica tempo mondo vita cuore strada "
        "chiesa piazza gelato bicchiere giovedì lunedì martedì mercoledì venerdì"
    ),
    "pt": (
        "o a os as de do da dos das em no na um uma e que não por para com se mais "
        "como mas foi ao ele ela eles elas seu sua ou ser quando muito há nos já está "
        "também só pelo pela até isso entre depois sem mesmo aos ter seus quem nas me "
        "coração ação nação mãe pão irmão irmã informação português você avô avó "
        "três mês país saúde família música órgão lição amanhã cidade água pé café"
    ),
    "nl": (
        "de het een en van in is dat op te zijn met voor niet aan er ook als bij maar "
        "om dan wat nog wel door naar over uit of worden hij zij wij jullie ze ik jij "
        "heeft hebben was waren kan kunnen moet moeten zou zouden veel meer heel goed "
        "huis straat stad fiets water brood kaas meisje jongen vrouw man kind dag nacht "
        "ijs vrij zeer één tweeën geïnteresseerd België café reünie"
    ),
}

_ONSETS = (
    "b c d f g h j k l m n p qu r s t v w z bl br ch cl cr dr fl fr gl gr kl pl pr sc "
    "sch sh sk sl sm sn sp st str sw th tr tw wh wr ph gn gu"
).split()
_VOWELS = "a e i o u y a e i o u a e i o ai au ea ee ei eu ie oa oo ou".split()
_ACCENTED = "á à â ä ã å é è ê ë í ì î ï ó ò ô ö õ ú ù û ü ý æ œ ø".split()
_CODAS = ("", "", "", "", "n", "r", "s", "l", "t", "m", "nd", "nt", "rt", "st", "ck", "ng", "x", "ss", "ll")
_RARE_CODAS = ("ß", "ç", "ñ", "tz", "sch", "gh")
_ABBREVIATIONS = ("Dr.", "Mr.", "Mrs.", "Ms.", "Prof.", "St.", "Jr.", "Sr.", "e.g.", "i.e.", "etc.", "vs.", "No.", "approx.", "Mme.", "M.", "Sra.", "Hr.")
_NAMES = ("Anna", "Louis", "Élodie", "Jürgen", "Zoë", "Renée", "José", "Ángel", "Søren", "Chloé", "Müller", "Noël", "Björn", "Inês", "João", "Niccolò", "Daan", "Marta", "François", "Beyoncé")
_SYMBOLS = ("%", "$", "€", "£", "&", "@", "#", "*", "/", "+", "=", "°", "§", "<", ">", "(", ")", "[", "]")
_ENDINGS = (".", ".", ".", ".", ".", "!", "?", "?", "...", "…", "?!", "!!", ".")
_QUOTES = (('"', '"'), ("“", "”"), ("‘", "’"), ("«\u00a0", "\u00a0»"), ("«", "»"), ("„", "“"), ("'", "'"))


_TRIPLE_LETTERS = re.compile(r"(.)\1\1+")


def _pseudo_word(rng: random.Random) -> str:
    """A pronounceable made-up word (names, rare words): most real text has plenty."""
    parts = []
    for _ in range(rng.choice((1, 2, 2, 2, 3, 3))):
        onset = rng.choice(_ONSETS) if rng.random() < 0.85 else ""
        vowel = rng.choice(_ACCENTED) if rng.random() < 0.08 else rng.choice(_VOWELS)
        coda = rng.choice(_RARE_CODAS) if rng.random() < 0.03 else rng.choice(_CODAS)
        parts.append(onset + vowel + coda)
    return _TRIPLE_LETTERS.sub(r"\1\1", "".join(parts))



def _number(rng: random.Random) -> str:
    kind = rng.randrange(9)
    if kind == 0:
        return f"{rng.randrange(0, 100)}.{rng.randrange(0, 100):02d}"  # decimal, e.g. 3.14
    if kind == 1:
        return f"{rng.randrange(1, 1000)},{rng.randrange(0, 1000):03d}"  # thousands, e.g. 1,000
    if kind == 2:
        return f"{rng.randrange(1, 24)}:{rng.randrange(0, 60):02d}"  # time of day
    if kind == 3:
        return f"{rng.randrange(1, 100)}%"
    if kind == 4:
        return str(rng.randrange(1800, 2100))  # year
    if kind == 5:
        return f"{rng.randrange(0, 10)},{rng.randrange(0, 100)}"  # European decimal
    if kind == 6:
        return rng.choice(("$", "€", "£")) + str(rng.randrange(1, 10000))
    if kind == 7:
        return f"{rng.randrange(1, 32)}/{rng.randrange(1, 13)}/{rng.randrange(1990, 2040)}"
    return str(rng.randrange(0, 1000))


_CONTRACTIONS = (
    "don't", "it's", "I'm", "we're", "can't", "won't", "l'homme", "c'est", "j'ai", "l'école",
    "dell'anno", "it’s", "don’t", "I’ve", "l’amour", "c’est", "o’clock", "d’accord", "'s",
)


def _sentence(rng: random.Random, words: tuple[str, ...], lang: str = "en") -> str:
    tokens: list[str] = []
    for i in range(rng.randrange(3, 18)):
        r = rng.random()
        if r < 0.70:
            tok = rng.choice(words)
        elif r < 0.82:
            tok = _pseudo_word(rng)
        elif r < 0.88:
            tok = _number(rng)
        elif r < 0.92:
            tok = rng.choice(_NAMES)
        elif r < 0.95:
            tok = rng.choice(_ABBREVIATIONS)
        elif r < 0.97:
            tok = rng.choice(_CONTRACTIONS)
        elif r < 0.985:
            tok = rng.choice(_SYMBOLS) + rng.choice(words)
        else:
            tok = rng.choice(("-", "–", "—"))
        if tokens and rng.random() < 0.12 and tokens[-1][-1:].isalnum():
            tokens[-1] += rng.choice((",", ",", ",", ";", ":"))
        if rng.random() < 0.03 and tok.isalpha():
            tok = f"{tok}-{rng.choice(words)}"
        if rng.random() < 0.03:
            tok = f"({tok})"
        tokens.append(tok)
    text = " ".join(tokens)
    text = text[0].upper() + text[1:] + rng.choice(_ENDINGS)
    if lang == "es" and text[-1] in "?!":
        text = ("¿" if text[-1] == "?" else "¡") + text
    if rng.random() < 0.1:
        left, right = rng.choice(_QUOTES)
        text = left + text + right
    return text


def synthetic_corpus(seed: int = 0, num_lines: int = 8000) -> list[str]:
    """Deterministic multilingual lines of text (English-heavy) for training.

    Each line holds one to three sentences mixing common words of English,
    French, German, Spanish, Italian, Portuguese and Dutch with made-up words,
    numbers (``3.14``, ``1,000``, ``10:30``, ``42%``), abbreviations (``Dr.``),
    apostrophes (straight and curly), quotes, dashes and ``.!?…`` endings.
    """
    rng = random.Random(seed)
    vocab = {lang: tuple(text.split()) for lang, text in _WORDS.items()}
    langs = list(vocab)
    weights = [6 if lang == "en" else 1 for lang in langs]
    lines = []
    for _ in range(num_lines):
        lang = rng.choices(langs, weights)[0]
        lines.append(" ".join(_sentence(rng, vocab[lang], lang) for _ in range(rng.choice((1, 1, 2, 3)))))
    return lines


# --------------------------------------------------------------------------
# SentencePiece
# --------------------------------------------------------------------------

# Every character the tokenizers should know (so that none of them maps to <unk>),
# appended once to the training text.
_ALPHABET_LINE = (
    "0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ "
    "àâäáãåæçéèêëíìîïñóòôöõøœúùûüýÿß ÀÂÄÁÃÅÆÇÉÈÊËÍÌÎÏÑÓÒÔÖÕØŒÚÙÛÜÝŸ "
    "' \" “ ” ‘ ’ « » „ ‹ › . , ; : ! ? ¿ ¡ - – — ( ) [ ] { } < > / \\ | @ # $ € £ % & * + = _ ~ ^ ` ° §"
)


def _num_lines_for(vocab_size: int) -> int:
    # Enough text for `vocab_size` pieces to survive pruning, small enough to
    # train in about two seconds for 4000 pieces.
    return max(2000, int(1.5 * vocab_size))


@functools.lru_cache(maxsize=4)
def train_sentencepiece(vocab_size: int = DEFAULT_VOCAB_SIZE, seed: int = 0) -> bytes:
    """Train a unigram SentencePiece model; returns the serialized ``.model`` bytes.

    ``vocab_size`` counts every piece, ``<unk>`` (id 0) included. The synthetic
    corpus supports about 200 to 16000 pieces (16000 trains in about 7 s).
    Results are cached per ``(vocab_size, seed)`` in this process.

    Raises:
        InputError: a ``vocab_size`` the synthetic corpus cannot support.
        RuntimeError: the trained model lacks a property this module promises.
    """
    import sentencepiece as spm

    if not isinstance(vocab_size, int) or vocab_size < 1:
        raise InputError(f"vocab_size must be a positive integer, got {vocab_size!r}")
    lines = [*synthetic_corpus(seed, _num_lines_for(vocab_size)), _ALPHABET_LINE]
    model = io.BytesIO()
    spm.set_random_generator_seed(seed)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=model,
            model_type="unigram",
            vocab_size=vocab_size,
            character_coverage=1.0,
            normalization_rule_name="nmt_nfkc",
            remove_extra_whitespaces=False,
            add_dummy_prefix=True,
            split_by_whitespace=True,
            split_by_unicode_script=True,
            split_digits=True,  # "1999" is 1 9 9 9: no equal-score ties between "9"+"99" and "99"+"9"
            # The chunker's marks are always pieces of their own (never "▁.", '."' or "30.").
            user_defined_symbols=list(_BOUNDARY_MARKS),
            unk_id=0,
            bos_id=-1,
            eos_id=-1,
            pad_id=-1,
            hard_vocab_limit=True,
            num_threads=1,  # one thread: the EM sums, hence the pieces, are reproducible
            input_sentence_size=0,
            shuffle_input_sentence=False,
            minloglevel=2,
        )
    except RuntimeError as exc:
        raise InputError(
            f"cannot train a SentencePiece model with vocab_size={vocab_size} on the synthetic corpus "
            f"({exc}); use a size between about 200 and 16000"
        ) from exc
    data = model.getvalue()
    _check_sentencepiece(data, vocab_size)
    return data


def _check_sentencepiece(data: bytes, vocab_size: int) -> None:
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor()
    sp.load_from_serialized_proto(data)
    if sp.vocab_size() != vocab_size:
        raise RuntimeError(f"trained SentencePiece model has {sp.vocab_size()} pieces, expected {vocab_size}")
    for text, marks in ((".!...?", [".", "!", ".", ".", ".", "?"]), (",;:", [",", ";", ":"])):
        pieces = sp.encode(text, out_type=str)
        if pieces != ["▁", *marks]:
            raise RuntimeError(f"SentencePiece encodes {text!r} as {pieces}, expected {['▁', *marks]}")


def write_sentencepiece_model(
    path: str | os.PathLike[str], vocab_size: int = DEFAULT_VOCAB_SIZE, seed: int = 0
) -> Path:
    """Train a unigram SentencePiece model and write it to ``path`` (a ``.model`` file).

    Deterministic: the same ``(vocab_size, seed)`` gives the same bytes. About two
    seconds for 4000 pieces. Parent folders are created; the file is replaced
    atomically. Returns ``path`` as a :class:`~pathlib.Path`.

    Raises:
        InputError: a ``vocab_size`` the synthetic corpus cannot support.
    """
    return _atomic_write(Path(path), train_sentencepiece(vocab_size, seed))


# --------------------------------------------------------------------------
# tokenizers JSON
# --------------------------------------------------------------------------

# sentencepiece_model.proto: ModelProto.pieces = 1, ModelProto.normalizer_spec = 3;
# SentencePiece.piece = 1, .score = 2, .type = 3; NormalizerSpec.precompiled_charsmap = 2.
_PIECE_USER_DEFINED = 4
_UNK_SURFACE = " \u2047 "  # how SentencePiece decodes <unk>
_UNK_SCORE = -1e6


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _proto_fields(buf: bytes):
    """Yield ``(field_number, wire_type, value)`` for the top level of one protobuf message."""
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == 2:
            size, pos = _read_varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield field, wire, value


def _parse_model_proto(model_proto: bytes) -> tuple[list[int], bytes]:
    """(type of every piece, precompiled charsmap) of a serialized ModelProto.

    Parsed by hand so that the ``protobuf`` package is not needed.
    """
    types: list[int] = []
    charsmap = b""
    for field, wire, value in _proto_fields(model_proto):
        if field == 1 and wire == 2:
            piece_type = 1  # NORMAL, the default when the field is absent
            for sub_field, sub_wire, sub_value in _proto_fields(value):
                if sub_field == 3 and sub_wire == 0:
                    piece_type = sub_value
            types.append(piece_type)
        elif field == 3 and wire == 2:
            for sub_field, sub_wire, sub_value in _proto_fields(value):
                if sub_field == 2 and sub_wire == 2:
                    charsmap = bytes(sub_value)
    return types, charsmap


def sentencepiece_to_tokenizers_json(model_proto: bytes) -> str:
    """Convert a serialized unigram SentencePiece model into a ``tokenizers`` JSON string.

    Same pieces in the same order with the same scores (``Unigram`` model,
    ``<unk>`` at the SentencePiece unk id). The normalizer is SentencePiece's
    precompiled map (``Precompiled``), then a ``▁`` prepended to every input
    (``add_dummy_prefix``, even before a leading space) and spaces replaced by
    ``▁``; the pre-tokenizer is ``Metaspace`` (split into words, no second
    prefix) and the decoder ``Metaspace(prepend_scheme="always")``, so
    ``decode(encode(text))`` gives back the normalized text, spaces included.

    User-defined pieces (the punctuation marks) get the score
    ``len(piece) * best_score - 0.1``, SentencePiece's bonus that makes them win
    over ordinary pieces. The ``<unk>`` piece gets a very low score so that the
    text "<unk>" is never matched to it (SentencePiece never does) and decodes
    as SentencePiece's " ⁇ ".

    Exact for models trained like :func:`train_sentencepiece` (whitespace kept,
    no byte fallback, no control pieces).
    """
    import sentencepiece as spm
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    sp = spm.SentencePieceProcessor()
    sp.load_from_serialized_proto(model_proto)
    types, charsmap = _parse_model_proto(model_proto)
    if len(types) != sp.vocab_size():
        raise ValueError(f"model proto lists {len(types)} pieces, sentencepiece reports {sp.vocab_size()}")
    scores = [float(sp.get_score(i)) for i in range(sp.vocab_size())]
    normal = [s for s, t in zip(scores, types, strict=True) if t == 1]
    best = max(normal) if normal else 0.0
    vocab = []
    for i, (score, piece_type) in enumerate(zip(scores, types, strict=True)):
        piece = sp.id_to_piece(i)
        if piece_type == _PIECE_USER_DEFINED:
            score = len(piece) * best - 0.1
        elif i == sp.unk_id():
            # SentencePiece never matches the text "<unk>" to the unk piece; a score
            # this low keeps the unigram search of `tokenizers` from doing it either.
            score = _UNK_SCORE
        vocab.append((piece, score))
    unk_id = sp.unk_id() if sp.unk_id() >= 0 else None
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=unk_id, byte_fallback=False))
    # SentencePiece normalizes (charsmap), then always adds the dummy "▁" prefix
    # (even before a leading space) and turns every space into "▁".
    steps = [normalizers.Precompiled(charsmap)] if charsmap else []
    steps += [normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]
    tokenizer.normalizer = normalizers.Sequence(steps)
    # Pieces never hold an inner "▁", so splitting words before the unigram search changes nothing.
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    metaspace = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    if unk_id is None:
        tokenizer.decoder = metaspace
    else:  # SentencePiece decodes <unk> as " ⁇ "
        tokenizer.decoder = decoders.Sequence([decoders.Replace(vocab[unk_id][0], _UNK_SURFACE), metaspace])
    # Sorted keys and no indentation: stable bytes for a given model.
    return json.dumps(json.loads(tokenizer.to_str()), ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def write_tokenizers_json(
    path: str | os.PathLike[str], vocab_size: int = DEFAULT_VOCAB_SIZE, seed: int = 0
) -> Path:
    """Write a HuggingFace ``tokenizers`` JSON (unigram) with ``vocab_size`` pieces to ``path``.

    It is the conversion (:func:`sentencepiece_to_tokenizers_json`) of the model
    :func:`write_sentencepiece_model` writes for the same arguments, so the two
    files give the same ids. Deterministic (same bytes for the same arguments).
    Returns ``path`` as a :class:`~pathlib.Path`.

    Raises:
        InputError: a ``vocab_size`` the synthetic corpus cannot support.
    """
    text = sentencepiece_to_tokenizers_json(train_sentencepiece(vocab_size, seed))
    return _atomic_write(Path(path), text.encode("utf-8"))


def _atomic_write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
