"""Text normalization: numbers, dates, times, money, units and abbreviations written out as
people say them, per language, before chunking.

``normalize(text, language)`` rewrites what it can read and passes everything else through
as written (long digit strings, malformed dates such as ``31/02/2026``, emoji, other
scripts, lone symbols). It is idempotent on its own output and never drops a word.

Languages: English (``en``), French (``fr``), German (``de``), Spanish (``es``), Italian
(``it``), Portuguese (``pt``, European wording as num2words writes it: dezasseis), Russian
(``ru``, :mod:`vocalis.text.normalize_ru`), Japanese (``ja``) and Korean (``ko``)
(:mod:`vocalis.text.normalize_cjk`). Chinese is not covered (num2words 0.5.14 has no Chinese
converter): asking for it is an error, ``auto`` leaves it as written. Number words come from
``num2words`` (0.5.14); the patterns (which digits are a date, a time, money...) are the
rules below, one table per language. One left-to-right pass: a span that one rule read (or
refused, such as an invalid date) is not read again by another.

Conventions (the tests write the expected readings from them):

* English: ``1,000`` = one thousand, ``1.5`` = one point five (digits one by one after the
  point); dates are month/day(/year) (US); ``3/4`` is a fraction unless a date word
  (``on``, ``since``, ``until``, ``by``, ``from``) precedes it; 4-digit numbers 1100-2099
  are years after ``in``/``since``/month names..., else cardinals. ``24/7`` is twenty-four
  seven (in every language: not a fraction), ``9/11`` nine eleven, ``5'11"`` five foot eleven,
  ``911``/``999``/``112`` after ``call``/``dial`` digit by digit (nine one one), ``Q3 2025``
  Q three twenty twenty-five, ``p. 5``/``pp.`` page(s) five, ``no. 5`` number five.
* Every language of this module: ``+5`` plus five, ``3..5`` a range (three to five); a dot
  after a unit (``5 min. then``) is the abbreviation's: read with it, kept only where it
  ends the sentence (the end of the text, or a capital letter next).
* French and German: ``1.000`` (and French ``1 000``) = a thousand, ``1,5`` = one comma five;
  dates are day/month/year (German ``12.05.2026``); German ordinals ``3.`` are read only
  after an article or before a month name (``am 3. Mai`` = am dritten Mai).
* German years 1100-1999 are read as years (siebzehnhundertneunundvierzig) after ``im``,
  ``Jahr``, a month...; after ``seit``, ``bis``, ``von``, ``ab``, ``um``, ``vor``, ``nach``..., next
  to a year word (``1749 geboren``, ``starb 1832``, ``1749 in Frankfurt geboren``: the word
  later in the clause) and in brackets (``Goethe (1749–1832)``), unless a noun follows the
  number (``1749 Euro``, ``1749 Menschen``: cardinals). ``1`` before a noun is ``eine`` when
  the noun is feminine (a list of common nouns and units, compounds ending in one of them,
  the suffixes -ung, -heit, -keit, -schaft, -ion, -tät, -ik, -ur...), else ``ein``; the case
  is not inflected (mit 1 Person = mit eine Person).
* Square and cubic units: ``m²``, ``km²``, ``cm²``, ``m³``, ``cm³`` (square meters,
  Quadratmeter, mètres carrés, metros cuadrados...).
* Spanish, Italian, Portuguese: written like French (``1.000`` = mil/mille, ``3,5`` = tres coma
  cinco); dates ``21 de mayo de 2026`` / ``21 maggio 2026`` / ``21 de maio de 2026`` (day 1:
  es uno, but 1.º primero; it primo; pt primeiro); ``14:30`` = catorce y treinta / quattordici e
  trenta / catorze e trinta; ordinals ``1º``/``1ª`` (Italian also ``1°`` after an article, else
  a degree); money ``3,50 €`` = tres euros con cincuenta céntimos; a cardinal before a unit or a
  currency agrees with it (veintiún euros, doscientas libras, duas libras), and so does one before
  a noun (the next word, in lower case, plural after a number other than 1): veintiuna personas,
  veintiún libros, quinientas páginas, duas pessoas, uma casa, una casa, un'ora, uno studente.
  The noun's gender comes from ``romance_feminine`` (-a but día, problema, programa...; -ción,
  -dad, -tud, -umbre...; a list of common nouns such as mano, noche, vez); after a label
  (capítulo 1, página 21) the number is a name and keeps num2words' form (veintiuno).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from vocalis.errors import InputError
from vocalis.text import normalize_ru as ru
from vocalis.text.normalize_cjk import CjkRules
from vocalis.text.normalize_ru import RussianRules
from vocalis.text.rules import Rules, number_words, roman_value, valid_date

LANGUAGES = {"en": "en", "english": "en", "eng": "en", "en-us": "en", "en-gb": "en",
             "fr": "fr", "french": "fr", "français": "fr", "francais": "fr", "fra": "fr",
             "de": "de", "german": "de", "deutsch": "de", "deu": "de", "ger": "de",
             "es": "es", "spanish": "es", "español": "es", "espanol": "es", "spa": "es", "es-es": "es",
             "es-mx": "es", "it": "it", "italian": "it", "italiano": "it", "ita": "it",
             "pt": "pt", "portuguese": "pt", "português": "pt", "portugues": "pt", "por": "pt",
             "pt-pt": "pt", "pt-br": "pt",
             "ru": "ru", "russian": "ru", "русский": "ru", "rus": "ru", "ru-ru": "ru",
             "ja": "ja", "japanese": "ja", "日本語": "ja", "jpn": "ja", "ja-jp": "ja",
             "ko": "ko", "korean": "ko", "한국어": "ko", "kor": "ko", "ko-kr": "ko"}
SUPPORTED = ("en", "fr", "de", "es", "it", "pt", "ru", "ja", "ko")
ROMANCE = ("es", "it", "pt")  # written like French: decimal comma, day/month/year, amount then currency

def resolve_language(language: str | None) -> str | None:
    """``en``/``fr``/``de``/``es``/``it``/``pt``/``ru``/``ja``/``ko`` for a code or name (any
    case); ``None`` for ``auto``.

    Raises:
        InputError: a language normalization does not cover (names the supported ones).
    """
    if language is None:
        return None
    if not isinstance(language, str):
        raise InputError(f"language must be a string, got {type(language).__name__}", param="language")
    key = language.strip().lower()
    if key in ("auto", ""):
        return None
    if key in LANGUAGES:
        return LANGUAGES[key]
    raise InputError(f"text normalization does not cover language {language!r}; supported: "
                     "en (english), fr (french), de (german), es (spanish), it (italian), "
                     "pt (portuguese), ru (russian), ja (japanese), ko (korean), or auto (Chinese is not "
                     "covered)", param="language")


def supports(language: str | None) -> bool:
    """Whether :func:`normalize` takes ``language`` (``auto`` included)."""
    try:
        resolve_language(language)
    except InputError:
        return False
    return True


def _other_script(text: str) -> bool:
    """Letters of a script other than Latin (CJK, Cyrillic...): ``auto`` leaves such text."""
    for c in text:
        if c.isalpha() and not unicodedata.name(c, "").startswith("LATIN"):
            return True
    return False


# ----------------------------------------------------------------------------- words

def _w(n, lang: str, to: str = "cardinal") -> str:
    out = number_words()(n, lang=lang, to=to)
    return out.replace(",", "") if lang == "en" else out


def card(n: int, lang: str) -> str:
    return _w(n, lang)


def ordinal(n: int, lang: str) -> str:
    return _w(n, lang, "ordinal")


DIGIT = {"en": ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"],
         "fr": ["zéro", "un", "deux", "trois", "quatre", "cinq", "six", "sept", "huit", "neuf"],
         "de": ["null", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun"],
         "es": ["cero", "uno", "dos", "tres", "cuatro", "cinco", "seis", "siete", "ocho", "nueve"],
         "it": ["zero", "uno", "due", "tre", "quattro", "cinque", "sei", "sette", "otto", "nove"],
         "pt": ["zero", "um", "dois", "três", "quatro", "cinco", "seis", "sete", "oito", "nove"]}
POINT = {"en": "point", "fr": "virgule", "de": "Komma", "es": "coma", "it": "virgola", "pt": "vírgula"}
DOT = {"en": "point", "fr": "point", "de": "Punkt", "es": "punto", "it": "punto", "pt": "ponto"}
MINUS = {"en": "minus", "fr": "moins", "de": "minus", "es": "menos", "it": "meno", "pt": "menos"}
PLUS = {"en": "plus", "fr": "plus", "de": "plus", "es": "más", "it": "più", "pt": "mais"}
TO = {"en": "to", "fr": "à", "de": "bis", "es": "a", "it": "a", "pt": "a"}


def digits(s: str, lang: str) -> str:
    return " ".join(DIGIT[lang][int(c)] for c in s if c.isdigit())


def integer(s: str, lang: str) -> str:
    """A digit string (no separators): leading zeros and long runs digit by digit."""
    if len(s) > 1 and s[0] == "0":
        return digits(s, lang)
    return card(int(s), lang)


def decimal(whole: str, frac: str, lang: str) -> str:
    """``whole`` point ``frac``: French reads a short fraction without leading zero as a
    number (3,14 = trois virgule quatorze), English and German digit by digit."""
    head = integer(whole, lang) if whole else DIGIT[lang][0]
    if lang in ("fr",) + ROMANCE and len(frac) <= 2 and frac[0] != "0":
        tail = card(int(frac), lang)
    else:
        tail = digits(frac, lang)
    return f"{head} {POINT[lang]} {tail}"


def number(s: str, lang: str) -> str:
    """A written number in the language's own separators -> words (no sign)."""
    thou, dec = (",", ".") if lang == "en" else (".", ",")
    s = s.replace("\u202f", " ").replace("\u00a0", " ")
    if lang != "en" and " " in s:
        s = s.replace(" ", "")
    if dec in s:
        whole, frac = s.split(dec, 1)
        return decimal(whole.replace(thou, ""), frac, lang)
    return integer(s.replace(thou, ""), lang)


def year(n: int, lang: str) -> str:
    """A year as said: English nineteen ninety-nine / nineteen oh five / twenty ten, German
    neunzehnhundertneunundneunzig (1100-1999; later years as cardinals), French cardinals."""
    if lang == "en":
        w = _w(n, lang, "year")
        return w.replace("oh-", "oh ", 1) if 1000 <= n < 2000 and 0 < n % 100 < 10 else w
    if lang == "de" and 1100 <= n < 2000:
        return _w(n, lang, "year")
    return card(n, lang)


MONTHS = {
    "en": ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"],
    "fr": ["janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre", "novembre", "décembre"],
    "de": ["Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September", "Oktober", "November", "Dezember"],
    "es": ["enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto", "septiembre", "octubre",
           "noviembre", "diciembre"],
    "it": ["gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno", "luglio", "agosto", "settembre", "ottobre",
           "novembre", "dicembre"],
    "pt": ["janeiro", "fevereiro", "março", "abril", "maio", "junho", "julho", "agosto", "setembro", "outubro",
           "novembro", "dezembro"],
}
def de_ordinal(n: int, case: str) -> str:
    """German ordinal with ending ``case``: "e" (der dritte), "en" (am dritten), "er"
    (dritter), "" (the stem, dritt)."""
    base = ordinal(n, "de")  # "dritte"
    return base[:-1] + case if base.endswith("e") else base


_MILLIONS = re.compile(r"\b(?:millón|millones|billón|billones|milhão|milhões|bilião|biliões|bilhão|bilhões)\b")


def gendered(words: str, lang: str, fem: bool) -> str:
    """A Spanish/Italian/Portuguese cardinal before a noun: es ``uno`` -> ``un``/``una``
    (veintiún euros, veintiuna horas), feminine hundreds (doscientas); it ``uno`` ->
    ``un``/``una``; pt ``um`` -> ``uma``, ``dois`` -> ``duas`` (duas mil), duzentas. Millions
    are masculine nouns: what counts them keeps its form (doscientos millones de personas)."""
    if lang == "es":
        if re.search(r"uno$", words):
            words = words[:-3] + ("una" if fem else ("ún" if words.endswith("iuno") else "un"))
        if fem:
            cut = max((x.end() for x in _MILLIONS.finditer(words)), default=0)
            words = words[:cut] + re.sub(r"ientos\b", "ientas", words[cut:])
    elif lang == "it":
        if words == "uno":
            words = "una" if fem else "un"
    elif lang == "pt" and fem:
        cut = max((x.end() for x in _MILLIONS.finditer(words)), default=0)
        tail = re.sub(r"\bum\b", "uma", words[cut:])
        tail = re.sub(r"\bdois\b", "duas", tail)
        words = words[:cut] + re.sub(r"entos\b", "entas", tail)
    return words


# The gender of a Spanish, Italian or Portuguese noun after a number (21 personas =
# veintiuna personas, 1 casa = una/uma casa, 2 pessoas = duas pessoas): feminine when it is
# in ROMANCE_FEM_NOUNS, or ends in -a (but not the masculine nouns in -a of
# ROMANCE_MASC_NOUNS, nor the people in -ista, of either gender, said masculine in a count) or
# in a feminine suffix; plurals are taken back to their singular (canciones -> canción).
ROMANCE_FEM_SUFFIXES = {"es": ("ción", "sión", "dad", "tad", "tud", "umbre", "ie"),
                        "it": ("zione", "sione", "gione", "tà", "tù", "trice"),
                        "pt": ("ção", "são", "dade", "tude", "agem", "ice")}
ROMANCE_MASC_NOUNS = {
    "es": {"día", "mapa", "problema", "programa", "sistema", "tema", "idioma", "clima", "planeta", "drama", "poema",
           "diploma", "esquema", "dilema", "lema", "enigma", "panorama", "síntoma", "fantasma", "cometa", "poeta",
           "atleta", "sofá", "papá", "tranvía", "pijama", "mediodía", "telegrama", "crucigrama", "diagrama",
           "gorila", "aroma", "dogma", "trauma", "carisma", "prisma", "karma", "koala", "panda", "delta",
           "cura", "guardia", "policía", "guía", "pirata", "astronauta", "profeta", "jerarca", "monarca", "patriarca"},
    "it": {"problema", "sistema", "programma", "tema", "clima", "pianeta", "poeta", "atleta", "cinema", "dramma",
           "diploma", "schema", "panorama", "papa", "pigiama", "telegramma", "diagramma", "enigma", "dilemma",
           "fantasma", "idioma", "poema", "sintomo", "teorema", "aroma", "dogma", "trauma", "carisma", "pilota",
           "collega", "pirata", "astronauta", "profeta", "monarca", "giorno"},
    "pt": {"dia", "mapa", "problema", "sistema", "programa", "tema", "clima", "planeta", "idioma", "poeta", "atleta",
           "cinema", "drama", "esquema", "poema", "diploma", "sofá", "telefonema", "dilema", "lema", "enigma",
           "panorama", "fantasma", "cometa", "pijama", "aroma", "dogma", "trauma", "carisma", "prisma", "guarda",
           "guia", "policia", "pirata", "astronauta", "profeta", "monarca", "colega", "samba"},
}
ROMANCE_FEM_NOUNS = {
    "es": {"mano", "foto", "moto", "radio", "noche", "calle", "gente", "parte", "clase", "llave", "vez", "luz", "voz",
           "ley", "red", "flor", "mujer", "imagen", "razón", "opinión", "región", "religión", "unión", "piel", "sal",
           "tarde", "muerte", "suerte", "frase", "fase", "base", "nube", "torre", "fuente", "carne", "leche", "nave",
           "sede", "crisis", "tesis", "dosis", "hipótesis", "síntesis", "miel", "cárcel", "señal", "catedral",
           "labor", "madre", "nieve", "fiebre", "sangre", "paz", "cruz", "nariz", "raíz", "actriz", "cicatriz",
           "pared", "sed", "virtud", "lección", "estación", "ración", "canción", "nación", "ocasión", "misión",
           "visión", "versión", "sesión", "pensión", "mente", "frente", "serpiente", "costumbre", "cumbre"},
    "it": {"mano", "notte", "chiave", "parte", "gente", "classe", "frase", "fase", "base", "legge", "luce", "voce",
           "nave", "sede", "serie", "specie", "radio", "foto", "moto", "auto", "mente", "morte", "sorte", "fonte",
           "torre", "carne", "neve", "fame", "sete", "pelle", "arte", "immagine", "origine", "canzone", "opinione",
           "unione", "occasione", "lezione", "madre", "moglie", "donna", "febbre", "pace",
           "croce", "radice", "attrice", "rete", "parete", "estate", "tesi", "crisi", "analisi", "ipotesi", "volte"},
    "pt": {"mão", "vez", "luz", "voz", "lei", "rede", "flor", "mulher", "noite", "tarde", "parte", "gente", "classe",
           "chave", "fase", "frase", "base", "nuvem", "ordem", "cor", "dor", "pele", "fonte", "torre", "carne",
           "morte", "sorte", "série", "espécie", "foto", "moto", "tribo", "neve", "febre", "fome", "sede", "nave",
           "árvore", "mãe", "irmã", "maçã", "lã", "imagem", "margem", "origem", "ponte", "mente", "frente",
           "semente", "lente", "arte", "ave", "cruz", "paz", "raiz", "atriz", "cicatriz", "matriz", "razão",
           "opinião", "região", "religião", "união", "lição", "canção", "estação", "nação", "crise", "tese", "análise",
           "hipótese", "dose", "parede"},
}
# the number before these is a count; after ROMANCE_LABELS (capítulo 1, página 21) a name
ROMANCE_FUNCTION_WORDS = {
    "es": {"de", "del", "a", "al", "y", "e", "o", "u", "en", "con", "por", "para", "sin", "sobre", "entre", "hasta",
           "desde", "contra", "hacia", "según", "que", "como", "más", "menos", "ya", "no", "sí", "es", "son", "fue",
           "era", "está", "están", "hay", "la", "las", "el", "los", "lo", "un", "una", "se", "su", "sus", "muy", "tan",
           "cada", "ni", "pero", "mas", "tras", "ante", "bajo", "durante", "mediante"},
    "it": {"di", "del", "della", "e", "ed", "o", "a", "al", "alla", "in", "con", "per", "su", "da", "tra", "fra",
           "che", "è", "non", "più", "meno", "il", "la", "le", "lo", "gli", "i", "un", "una", "si", "ma", "come"},
    "pt": {"de", "do", "da", "dos", "das", "a", "à", "ao", "e", "o", "os", "as", "em", "no", "na", "com", "por",
           "para", "sem", "sobre", "entre", "até", "desde", "que", "como", "mais", "menos", "já", "não", "é", "são",
           "foi", "era", "está", "há", "um", "uma", "se", "mas", "ou", "nem", "após", "ante", "durante", "contra"},
}
ROMANCE_LABELS = {
    "es": {"capítulo", "página", "pág.", "número", "núm.", "artículo", "lección", "nivel", "fase", "paso", "punto",
           "parte", "sección", "tabla", "figura", "versión", "modelo", "tipo", "año", "siglo", "planta", "piso",
           "habitación", "línea", "canal", "puerta", "calle", "ruta", "grupo", "equipo", "tomo", "volumen", "libro",
           "acto", "escena", "título", "n.º", "nº"},
    "it": {"capitolo", "pagina", "pag.", "numero", "n.", "articolo", "lezione", "livello", "fase", "passo", "punto",
           "parte", "sezione", "tabella", "figura", "versione", "modello", "tipo", "anno", "secolo", "piano",
           "stanza", "linea", "canale", "porta", "via", "gruppo", "squadra", "tomo", "volume", "libro", "atto",
           "scena", "titolo"},
    "pt": {"capítulo", "página", "pág.", "número", "n.º", "nº", "artigo", "lição", "nível", "fase", "passo", "ponto",
           "parte", "secção", "seção", "tabela", "figura", "versão", "modelo", "tipo", "ano", "século", "andar",
           "piso", "quarto", "linha", "canal", "porta", "rua", "grupo", "equipa", "equipe", "tomo", "volume", "livro",
           "ato", "acto", "cena", "título"},
}
_FEM_IST = {"lista", "pista", "revista", "vista", "entrevista", "conquista", "arista"}


def _romance_singulars(word: str, lang: str) -> list[str]:
    """``word`` and the singulars it may be the plural of (canciones -> canción, veces -> vez,
    viagens -> viagem, lições -> lição)."""
    out = [word]
    if lang == "it" or not word.endswith("s"):
        return out
    out.append(word[:-1])
    if lang == "es" and word.endswith("es"):
        stem = word[:-2]
        out += [stem, stem[:-1] + "z"] if stem.endswith("c") else [stem]
        accent = {"a": "á", "e": "é", "i": "í", "o": "ó", "u": "ú"}
        if stem.endswith(("on", "en", "in")) and len(stem) > 2:  # canciones -> canción
            out.append(stem[:-2] + accent[stem[-2]] + stem[-1])
        out.append(stem.replace("á", "a").replace("é", "e").replace("í", "i").replace("ó", "o"))  # imágenes
    if lang == "pt":
        if word.endswith("ões"):
            out.append(word[:-3] + "ão")
        if word.endswith("ens"):
            out.append(word[:-3] + "em")
        if word.endswith("es"):
            out.append(word[:-2])
    return out


def romance_feminine(word: str, lang: str) -> bool:
    """Whether the Spanish/Italian/Portuguese noun ``word`` (singular or plural, lower case)
    is feminine (see ``ROMANCE_FEM_NOUNS``)."""
    forms = _romance_singulars(word, lang)
    if any(f in ROMANCE_FEM_NOUNS[lang] for f in forms):
        return True
    if any(f in ROMANCE_MASC_NOUNS[lang] for f in forms):
        return False
    sing = forms[1] if len(forms) > 1 else forms[0]
    if any(f.endswith(ROMANCE_FEM_SUFFIXES[lang]) for f in forms):
        return True
    if sing.endswith("ista") and sing not in _FEM_IST:
        return False  # los turistas, i turisti: people said masculine in a count
    return sing.endswith("a") and len(sing) > 2

def feminine_ordinal(w: str) -> str:
    """``primero``/``vigésimo primero`` -> ``primera``/``vigésima primera`` (es, it, pt)."""
    return " ".join(x[:-1] + "a" if x.endswith("o") else x for x in w.split())


def date_words(d: int, m: int, y: int | None, lang: str, de_case: str = "er") -> str:
    if lang in ROMANCE:
        day = {"es": card(d, "es"), "it": "primo" if d == 1 else card(d, "it"),
               "pt": "primeiro" if d == 1 else card(d, "pt")}[lang]
        de = "" if lang == "it" else " de"
        out = f"{day}{de} {MONTHS[lang][m - 1]}"
        return out + (f"{de} {year(y, lang)}" if y is not None else "")
    if lang == "en":
        out = f"{MONTHS['en'][m - 1]} {ordinal(d, 'en')}"
        return out + (f" {year(y, 'en')}" if y is not None else "")
    if lang == "fr":
        day = "premier" if d == 1 else card(d, "fr")
        out = f"{day} {MONTHS['fr'][m - 1]}"
        return out + (f" {year(y, 'fr')}" if y is not None else "")
    out = f"{de_ordinal(d, de_case)} {MONTHS['de'][m - 1]}"
    return out + (f" {year(y, 'de')}" if y is not None else "")


def fraction(a: int, b: int, lang: str) -> str:
    if lang == "en":
        if b == 2:
            return "one half" if a == 1 else f"{card(a, 'en')} halves"
        if b == 4:
            return "one quarter" if a == 1 else f"{card(a, 'en')} quarters"
        o = ordinal(b, "en")
        return f"one {o}" if a == 1 else f"{card(a, 'en')} {o}s"
    if lang == "fr":
        one = "un"
        names = {2: ("demi", "demis"), 3: ("tiers", "tiers"), 4: ("quart", "quarts")}
        if b in names:
            s, p = names[b]
            return f"{one} {s}" if a == 1 else f"{card(a, 'fr')} {p}"
        o = ordinal(b, "fr")
        return f"{one} {o}" if a == 1 else f"{card(a, 'fr')} {o}s"
    if lang in ROMANCE:
        one = {"es": "un", "it": "un", "pt": "um"}[lang]
        if lang == "it":
            s = "mezzo" if b == 2 else ordinal(b, "it")
            p = s[:-1] + "i"
        else:
            names = {"es": ["medio", "tercio", "cuarto", "quinto", "sexto", "séptimo", "octavo", "noveno", "décimo"],
                     "pt": ["meio", "terço", "quarto", "quinto", "sexto", "sétimo", "oitavo", "nono", "décimo"]}[lang]
            if b > 10:
                return None
            s = names[b - 2]
            p = s + "s"
        return f"{one} {s}" if a == 1 else f"{card(a, lang)} {p}"
    if b == 2:
        return "ein halb" if a == 1 else f"{card(a, 'de')} halbe"
    noun = de_ordinal(b, "").capitalize()
    noun += "el"  # dritt+el, zwanzigst+el
    return f"{'ein' if a == 1 else card(a, 'de')} {noun}"


# ----------------------------------------------------------------------------- tables

# unit: (singular, plural) per language
UNITS = {
    "km/h": {"en": ("kilometer per hour", "kilometers per hour"), "fr": ("kilomètre par heure", "kilomètres par heure"),
             "de": ("Kilometer pro Stunde", "Kilometer pro Stunde")},
    "mph": {"en": ("mile per hour", "miles per hour"), "fr": ("mile par heure", "miles par heure"),
            "de": ("Meile pro Stunde", "Meilen pro Stunde")},
    "m/s": {"en": ("meter per second", "meters per second"), "fr": ("mètre par seconde", "mètres par seconde"),
            "de": ("Meter pro Sekunde", "Meter pro Sekunde")},
    "km²": {"en": ("square kilometer", "square kilometers"), "fr": ("kilomètre carré", "kilomètres carrés"),
            "de": ("Quadratkilometer", "Quadratkilometer")},
    "cm²": {"en": ("square centimeter", "square centimeters"), "fr": ("centimètre carré", "centimètres carrés"),
            "de": ("Quadratzentimeter", "Quadratzentimeter")},
    "m²": {"en": ("square meter", "square meters"), "fr": ("mètre carré", "mètres carrés"),
           "de": ("Quadratmeter", "Quadratmeter")},
    "cm³": {"en": ("cubic centimeter", "cubic centimeters"), "fr": ("centimètre cube", "centimètres cubes"),
            "de": ("Kubikzentimeter", "Kubikzentimeter")},
    "m³": {"en": ("cubic meter", "cubic meters"), "fr": ("mètre cube", "mètres cubes"),
           "de": ("Kubikmeter", "Kubikmeter")},
    "km": {"en": ("kilometer", "kilometers"), "fr": ("kilomètre", "kilomètres"), "de": ("Kilometer", "Kilometer")},
    "cm": {"en": ("centimeter", "centimeters"), "fr": ("centimètre", "centimètres"), "de": ("Zentimeter", "Zentimeter")},
    "mm": {"en": ("millimeter", "millimeters"), "fr": ("millimètre", "millimètres"), "de": ("Millimeter", "Millimeter")},
    "m": {"en": ("meter", "meters"), "fr": ("mètre", "mètres"), "de": ("Meter", "Meter")},
    "kg": {"en": ("kilogram", "kilograms"), "fr": ("kilogramme", "kilogrammes"), "de": ("Kilogramm", "Kilogramm")},
    "mg": {"en": ("milligram", "milligrams"), "fr": ("milligramme", "milligrammes"), "de": ("Milligramm", "Milligramm")},
    "g": {"en": ("gram", "grams"), "fr": ("gramme", "grammes"), "de": ("Gramm", "Gramm")},
    "lb": {"en": ("pound", "pounds"), "fr": ("livre", "livres"), "de": ("Pfund", "Pfund")},
    "lbs": {"en": ("pound", "pounds"), "fr": ("livre", "livres"), "de": ("Pfund", "Pfund")},
    "oz": {"en": ("ounce", "ounces"), "fr": ("once", "onces"), "de": ("Unze", "Unzen")},
    "ml": {"en": ("milliliter", "milliliters"), "fr": ("millilitre", "millilitres"), "de": ("Milliliter", "Milliliter")},
    "l": {"en": ("liter", "liters"), "fr": ("litre", "litres"), "de": ("Liter", "Liter")},
    "L": {"en": ("liter", "liters"), "fr": ("litre", "litres"), "de": ("Liter", "Liter")},
    "°C": {"en": ("degree Celsius", "degrees Celsius"), "fr": ("degré Celsius", "degrés Celsius"),
           "de": ("Grad Celsius", "Grad Celsius")},
    "°F": {"en": ("degree Fahrenheit", "degrees Fahrenheit"), "fr": ("degré Fahrenheit", "degrés Fahrenheit"),
           "de": ("Grad Fahrenheit", "Grad Fahrenheit")},
    "°": {"en": ("degree", "degrees"), "fr": ("degré", "degrés"), "de": ("Grad", "Grad")},
    "min": {"en": ("minute", "minutes"), "fr": ("minute", "minutes"), "de": ("Minute", "Minuten")},
    "sec": {"en": ("second", "seconds"), "fr": ("seconde", "secondes"), "de": ("Sekunde", "Sekunden")},
    "hrs": {"en": ("hour", "hours"), "fr": ("heure", "heures"), "de": ("Stunde", "Stunden")},
    "hr": {"en": ("hour", "hours"), "fr": ("heure", "heures"), "de": ("Stunde", "Stunden")},
    "ms": {"en": ("millisecond", "milliseconds"), "fr": ("milliseconde", "millisecondes"),
           "de": ("Millisekunde", "Millisekunden")},
    "GB": {"en": ("gigabyte", "gigabytes"), "fr": ("gigaoctet", "gigaoctets"), "de": ("Gigabyte", "Gigabyte")},
    "MB": {"en": ("megabyte", "megabytes"), "fr": ("mégaoctet", "mégaoctets"), "de": ("Megabyte", "Megabyte")},
    "TB": {"en": ("terabyte", "terabytes"), "fr": ("téraoctet", "téraoctets"), "de": ("Terabyte", "Terabyte")},
    "kB": {"en": ("kilobyte", "kilobytes"), "fr": ("kilooctet", "kilooctets"), "de": ("Kilobyte", "Kilobyte")},
    "GHz": {"en": ("gigahertz", "gigahertz"), "fr": ("gigahertz", "gigahertz"), "de": ("Gigahertz", "Gigahertz")},
    "MHz": {"en": ("megahertz", "megahertz"), "fr": ("mégahertz", "mégahertz"), "de": ("Megahertz", "Megahertz")},
    "Hz": {"en": ("hertz", "hertz"), "fr": ("hertz", "hertz"), "de": ("Hertz", "Hertz")},
    "kWh": {"en": ("kilowatt hour", "kilowatt hours"), "fr": ("kilowattheure", "kilowattheures"),
            "de": ("Kilowattstunde", "Kilowattstunden")},
    "kW": {"en": ("kilowatt", "kilowatts"), "fr": ("kilowatt", "kilowatts"), "de": ("Kilowatt", "Kilowatt")},
    "W": {"en": ("watt", "watts"), "fr": ("watt", "watts"), "de": ("Watt", "Watt")},
    "V": {"en": ("volt", "volts"), "fr": ("volt", "volts"), "de": ("Volt", "Volt")},
    "ft": {"en": ("foot", "feet"), "fr": ("pied", "pieds"), "de": ("Fuß", "Fuß")},
    "mi": {"en": ("mile", "miles"), "fr": ("mile", "miles"), "de": ("Meile", "Meilen")},
}
# Spanish, Italian, Portuguese: (singular, plural); a unit in ROMANCE_FEMININE takes una/uma
_ROMANCE_UNITS = {
    "km/h": (("kilómetro por hora", "kilómetros por hora"), ("chilometro orario", "chilometri orari"),
             ("quilómetro por hora", "quilómetros por hora")),
    "mph": (("milla por hora", "millas por hora"), ("miglio orario", "miglia orarie"),
            ("milha por hora", "milhas por hora")),
    "m/s": (("metro por segundo", "metros por segundo"), ("metro al secondo", "metri al secondo"),
            ("metro por segundo", "metros por segundo")),
    "km²": (("kilómetro cuadrado", "kilómetros cuadrados"), ("chilometro quadrato", "chilometri quadrati"),
            ("quilómetro quadrado", "quilómetros quadrados")),
    "cm²": (("centímetro cuadrado", "centímetros cuadrados"), ("centimetro quadrato", "centimetri quadrati"),
            ("centímetro quadrado", "centímetros quadrados")),
    "m²": (("metro cuadrado", "metros cuadrados"), ("metro quadrato", "metri quadrati"),
           ("metro quadrado", "metros quadrados")),
    "cm³": (("centímetro cúbico", "centímetros cúbicos"), ("centimetro cubo", "centimetri cubi"),
            ("centímetro cúbico", "centímetros cúbicos")),
    "m³": (("metro cúbico", "metros cúbicos"), ("metro cubo", "metri cubi"), ("metro cúbico", "metros cúbicos")),
    "km": (("kilómetro", "kilómetros"), ("chilometro", "chilometri"), ("quilómetro", "quilómetros")),
    "cm": (("centímetro", "centímetros"), ("centimetro", "centimetri"), ("centímetro", "centímetros")),
    "mm": (("milímetro", "milímetros"), ("millimetro", "millimetri"), ("milímetro", "milímetros")),
    "m": (("metro", "metros"), ("metro", "metri"), ("metro", "metros")),
    "kg": (("kilogramo", "kilogramos"), ("chilogrammo", "chilogrammi"), ("quilograma", "quilogramas")),
    "mg": (("miligramo", "miligramos"), ("milligrammo", "milligrammi"), ("miligrama", "miligramas")),
    "g": (("gramo", "gramos"), ("grammo", "grammi"), ("grama", "gramas")),
    "lb": (("libra", "libras"), ("libbra", "libbre"), ("libra", "libras")),
    "lbs": (("libra", "libras"), ("libbra", "libbre"), ("libra", "libras")),
    "oz": (("onza", "onzas"), ("oncia", "once"), ("onça", "onças")),
    "ml": (("mililitro", "mililitros"), ("millilitro", "millilitri"), ("mililitro", "mililitros")),
    "l": (("litro", "litros"), ("litro", "litri"), ("litro", "litros")),
    "L": (("litro", "litros"), ("litro", "litri"), ("litro", "litros")),
    "°C": (("grado Celsius", "grados Celsius"), ("grado Celsius", "gradi Celsius"), ("grau Celsius", "graus Celsius")),
    "°F": (("grado Fahrenheit", "grados Fahrenheit"), ("grado Fahrenheit", "gradi Fahrenheit"),
           ("grau Fahrenheit", "graus Fahrenheit")),
    "°": (("grado", "grados"), ("grado", "gradi"), ("grau", "graus")),
    "min": (("minuto", "minutos"), ("minuto", "minuti"), ("minuto", "minutos")),
    "sec": (("segundo", "segundos"), ("secondo", "secondi"), ("segundo", "segundos")),
    "hrs": (("hora", "horas"), ("ora", "ore"), ("hora", "horas")),
    "hr": (("hora", "horas"), ("ora", "ore"), ("hora", "horas")),
    "ms": (("milisegundo", "milisegundos"), ("millisecondo", "millisecondi"), ("milissegundo", "milissegundos")),
    "GB": (("gigabyte", "gigabytes"), ("gigabyte", "gigabyte"), ("gigabyte", "gigabytes")),
    "MB": (("megabyte", "megabytes"), ("megabyte", "megabyte"), ("megabyte", "megabytes")),
    "TB": (("terabyte", "terabytes"), ("terabyte", "terabyte"), ("terabyte", "terabytes")),
    "kB": (("kilobyte", "kilobytes"), ("kilobyte", "kilobyte"), ("kilobyte", "kilobytes")),
    "GHz": (("gigahercio", "gigahercios"), ("gigahertz", "gigahertz"), ("gigahertz", "gigahertz")),
    "MHz": (("megahercio", "megahercios"), ("megahertz", "megahertz"), ("megahertz", "megahertz")),
    "Hz": (("hercio", "hercios"), ("hertz", "hertz"), ("hertz", "hertz")),
    "kWh": (("kilovatio hora", "kilovatios hora"), ("chilowattora", "chilowattora"),
            ("quilowatt-hora", "quilowatts-hora")),
    "kW": (("kilovatio", "kilovatios"), ("chilowatt", "chilowatt"), ("quilowatt", "quilowatts")),
    "W": (("vatio", "vatios"), ("watt", "watt"), ("watt", "watts")),
    "V": (("voltio", "voltios"), ("volt", "volt"), ("volt", "volts")),
    "ft": (("pie", "pies"), ("piede", "piedi"), ("pé", "pés")),
    "mi": (("milla", "millas"), ("miglio", "miglia"), ("milha", "milhas")),
}
for _u, _rows in _ROMANCE_UNITS.items():
    for _lang, _row in zip(ROMANCE, _rows):
        UNITS[_u][_lang] = _row
ROMANCE_FEMININE = {"milla", "libra", "onza", "milha", "onça", "libbra", "oncia", "hora", "ora"}
_UNIT_RE = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))

# currency symbol/code -> (singular, plural, cent singular, cent plural)
MONEY = {
    "en": {"$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "cent", "cents"),
           "£": ("pound", "pounds", "penny", "pence"), "¥": ("yen", "yen", "", ""),
           "USD": ("dollar", "dollars", "cent", "cents"), "EUR": ("euro", "euros", "cent", "cents"),
           "GBP": ("pound", "pounds", "penny", "pence")},
    "fr": {"$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "centime", "centimes"),
           "£": ("livre", "livres", "penny", "pence"), "¥": ("yen", "yens", "", ""),
           "USD": ("dollar", "dollars", "cent", "cents"), "EUR": ("euro", "euros", "centime", "centimes"),
           "CHF": ("franc suisse", "francs suisses", "centime", "centimes")},
    "de": {"$": ("Dollar", "Dollar", "Cent", "Cent"), "€": ("Euro", "Euro", "Cent", "Cent"),
           "£": ("Pfund", "Pfund", "Penny", "Pence"), "¥": ("Yen", "Yen", "", ""),
           "USD": ("Dollar", "Dollar", "Cent", "Cent"), "EUR": ("Euro", "Euro", "Cent", "Cent"),
           "CHF": ("Franken", "Franken", "Rappen", "Rappen")},
    "es": {"$": ("dólar", "dólares", "centavo", "centavos"), "€": ("euro", "euros", "céntimo", "céntimos"),
           "£": ("libra", "libras", "penique", "peniques"), "¥": ("yen", "yenes", "", ""),
           "USD": ("dólar", "dólares", "centavo", "centavos"), "EUR": ("euro", "euros", "céntimo", "céntimos")},
    "it": {"$": ("dollaro", "dollari", "centesimo", "centesimi"), "€": ("euro", "euro", "centesimo", "centesimi"),
           "£": ("sterlina", "sterline", "penny", "pence"), "¥": ("yen", "yen", "", ""),
           "USD": ("dollaro", "dollari", "centesimo", "centesimi"), "EUR": ("euro", "euro", "centesimo", "centesimi"),
           "CHF": ("franco svizzero", "franchi svizzeri", "centesimo", "centesimi")},
    "pt": {"$": ("dólar", "dólares", "cêntimo", "cêntimos"), "€": ("euro", "euros", "cêntimo", "cêntimos"),
           "£": ("libra", "libras", "péni", "pence"), "¥": ("iene", "ienes", "", ""),
           "R$": ("real", "reais", "centavo", "centavos"), "BRL": ("real", "reais", "centavo", "centavos"),
           "USD": ("dólar", "dólares", "cêntimo", "cêntimos"), "EUR": ("euro", "euros", "cêntimo", "cêntimos")},
}
MONEY_FEMININE = {"libra", "sterlina"}
SCALE = {"en": {"k": "thousand", "K": "thousand", "M": "million", "m": "million", "B": "billion", "bn": "billion",
                "T": "trillion", "thousand": "thousand", "million": "million", "billion": "billion",
                "trillion": "trillion"},
         "fr": {"k": "mille", "M": "millions", "Md": "milliards", "Mrd": "milliards", "mille": "mille",
                "million": "million", "millions": "millions", "milliard": "milliard", "milliards": "milliards"},
         "de": {"Tsd.": "Tausend", "Mio.": "Millionen", "Mrd.": "Milliarden", "Million": "Million",
                "Millionen": "Millionen", "Milliarde": "Milliarde", "Milliarden": "Milliarden"},
         "es": {"M": "millones", "mil": "mil", "millón": "millón", "millones": "millones"},
         "it": {"M": "milioni", "mila": "mila", "milione": "milione", "milioni": "milioni", "miliardi": "miliardi"},
         "pt": {"M": "milhões", "mil": "mil", "milhão": "milhão", "milhões": "milhões"}}
PERCENT = {"en": "percent", "fr": "pour cent", "de": "Prozent", "es": "por ciento", "it": "per cento",
           "pt": "por cento"}

# "a rate": an amount or a unit, a slash, then what it is counted per (12 €/month)
PER = {"en": "per", "fr": "par", "de": "pro", "es": "por", "it": "per", "pt": "por"}
PER_WHAT = {
    "en": ("month", "year", "week", "day", "night", "hour", "minute", "person", "head", "unit",
           "mo", "yr", "hr", "kg", "km"),
    "fr": ("mois", "an", "année", "semaine", "jour", "nuit", "heure", "minute", "personne",
           "tête", "kg", "km"),
    "de": ("Monat", "Jahr", "Woche", "Tag", "Nacht", "Stunde", "Std", "Minute", "Person", "Kopf",
           "Stück", "kg", "km"),
    "es": ("mes", "año", "semana", "día", "noche", "hora", "minuto", "persona", "kg", "km"),
    "it": ("mese", "anno", "settimana", "giorno", "notte", "ora", "minuto", "persona", "kg", "km"),
    "pt": ("mês", "ano", "semana", "dia", "noite", "hora", "minuto", "pessoa", "kg", "km"),
}

# abbreviation (with its dot) -> reading; "keep_dot": it may end a sentence
ABBREV = {
    "en": {"Mr.": "Mister", "Mrs.": "Missus", "Ms.": "Miz", "Prof.": "Professor", "Jr.": "Junior",
           "Sr.": "Senior", "vs.": "versus", "etc.": "et cetera", "e.g.": "for example", "i.e.": "that is",
           "approx.": "approximately", "incl.": "including", "excl.": "excluding", "Mt.": "Mount",
           "Ave.": "Avenue", "Blvd.": "Boulevard", "Rd.": "Road", "Capt.": "Captain", "Sgt.": "Sergeant",
           "Lt.": "Lieutenant", "Gen.": "General",
           "Gov.": "Governor", "Sen.": "Senator", "Rep.": "Representative", "Inc.": "Incorporated",
           "Ltd.": "Limited", "Corp.": "Corporation", "Dept.": "Department", "Fig.": "Figure",
           "fig.": "figure", "Vol.": "Volume", "vol.": "volume", "Ch.": "Chapter", "ch.": "chapter"},
    "fr": {"Mme": "Madame", "Mmes": "Mesdames", "Mlle": "Mademoiselle", "Mlles": "Mesdemoiselles",
           "MM.": "Messieurs", "Dr": "Docteur", "Dr.": "Docteur", "Pr": "Professeur", "Pr.": "Professeur",
           "Ste": "Sainte", "St": "Saint", "etc.": "et cetera", "p. ex.": "par exemple", "c.-à-d.": "c'est-à-dire",
           "env.": "environ", "av.": "avenue", "bd": "boulevard", "bd.": "boulevard", "cf.": "confer"},
    "de": {"Dr.": "Doktor", "Prof.": "Professor", "Hr.": "Herr", "Fr.": "Frau", "z. B.": "zum Beispiel",
           "z.B.": "zum Beispiel", "d. h.": "das heißt", "d.h.": "das heißt", "usw.": "und so weiter",
           "bzw.": "beziehungsweise", "ca.": "circa", "u. a.": "unter anderem", "u.a.": "unter anderem",
           "evtl.": "eventuell", "ggf.": "gegebenenfalls", "inkl.": "inklusive", "vgl.": "vergleiche",
           "Str.": "Straße", "St.": "Sankt", "bspw.": "beispielsweise", "Jh.": "Jahrhundert",
           "Nr.": "Nummer", "Tel.": "Telefon", "MwSt.": "Mehrwertsteuer", "zzgl.": "zuzüglich",
           "exkl.": "exklusive"},
    "es": {"Sr.": "Señor", "Sra.": "Señora", "Srta.": "Señorita", "Dr.": "Doctor", "Dra.": "Doctora",
           "Prof.": "Profesor", "Profa.": "Profesora", "Lic.": "Licenciado", "Ing.": "Ingeniero", "Ud.": "usted",
           "Uds.": "ustedes", "Dña.": "Doña", "etc.": "etcétera", "p. ej.": "por ejemplo", "aprox.": "aproximadamente",
           "Av.": "Avenida", "Avda.": "Avenida", "pág.": "página", "tel.": "teléfono", "Sto.": "Santo"},
    "it": {"Sig.ra": "Signora", "Sig.na": "Signorina", "Sig.": "Signor", "Sigg.": "Signori", "Dott.ssa": "Dottoressa",
           "Dott.": "Dottor", "Prof.ssa": "Professoressa", "Prof.": "Professor", "Ing.": "Ingegner",
           "Avv.": "Avvocato", "Arch.": "Architetto", "ecc.": "eccetera", "pag.": "pagina", "tel.": "telefono",
           "ca.": "circa", "p.es.": "per esempio", "es.": "esempio"},
    "pt": {"Sr.": "Senhor", "Sra.": "Senhora", "Srta.": "Senhorita", "Dr.": "Doutor", "Dra.": "Doutora",
           "Prof.": "Professor", "Profa.": "Professora", "Eng.": "Engenheiro", "etc.": "etcétera",
           "p. ex.": "por exemplo", "aprox.": "aproximadamente", "Av.": "Avenida", "pág.": "página",
           "tel.": "telefone", "V. Exa.": "Vossa Excelência"},
}
# abbreviations whose dot may also end a sentence (Apple Inc. Then): kept before a capital
# letter; the others' dot is read with them (Dr. Smith, z. B. gut). Spanish, Italian,
# Portuguese: etc. and ecc. only.
MAY_END_SENTENCE = ("etc.", "usw.", "Jr.", "Sr.", "Inc.", "Ltd.", "Corp.", "Ave.", "Blvd.", "Rd.", "Str.",
                    "u.a.", "u. a.", "Dept.")
ROMANCE_MAY_END_SENTENCE = ("etc.", "ecc.")
EN_TITLES = ("Dr", "St")  # Doctor or Drive, Saint or Street (see _Normalizer.dr_st)
NUMBER_ABBREV = {"en": ("No.", "number"), "fr": ("n°", "numéro"), "de": ("Nr.", "Nummer"), "es": ("n.º", "número"),
                 "it": ("n.", "numero"), "pt": ("n.º", "número")}
NUMBER_ABBREV_RX = {"en": r"[Nn]o\.", "es": r"(?:n\.?º|núm\.)", "it": r"n\.", "pt": r"n\.?º"}
# page abbreviations, read only before a number (p. 5 = page five)
PAGE_ABBREV = {"en": {"p.": "page", "pp.": "pages"}, "fr": {"p.": "page"}, "de": {"S.": "Seite"}}
# a written pair that is not a fraction (24/7 = twenty-four seven, every hour of every day)
NOT_FRACTIONS = {(24, 7)}
EN_NOT_FRACTIONS = {(9, 11): "nine eleven"}
# emergency numbers read digit by digit after these words (call 911 = nine one one)
EMERGENCY_NUMBERS = {"911", "999", "112"}
EMERGENCY_CUES = {"call", "calls", "called", "calling", "dial", "dials", "dialed", "dialled", "dialing", "dialling",
                  "phone", "phoned", "ring", "rang", "text", "texted"}
YEAR_CUES = {"in", "since", "by", "until", "till", "from", "year", "before", "after", "around", "circa", "during",
             "early", "late", "mid", "spring", "summer", "autumn", "fall", "winter"}
DATE_CUES_EN = {"on", "since", "until", "by", "from", "till", "before", "after", "due"}
DATE_CUES_FR = {"le", "du", "au", "depuis", "dès", "jusqu'au", "avant", "après", "ce"}
DATE_CUES_ROMANCE = {"es": {"el", "del", "al", "desde", "hasta", "hoy", "fecha", "día"},
                     "it": {"il", "del", "al", "dal", "entro", "fino", "oggi", "data", "giorno"},
                     "pt": {"em", "no", "dia", "desde", "até", "ao", "do", "hoje", "data"}}
# Italian "N°" is an ordinal after these (il 1° posto), a degree otherwise
IT_ORDINAL_CUES = {"il", "lo", "la", "l'", "al", "allo", "alla", "del", "dello", "della", "nel", "nello", "nella",
                   "dal", "dallo", "dalla", "sul", "sullo", "sulla", "un", "una", "i", "gli", "le"}
DE_ARTICLES_TE = {"der", "die", "das"}
# German feminine nouns (1 Person = eine Person): common nouns and units, and (as the end of a
# compound of at least five letters: Kaffeetasse, Arbeitsstunde) the longer ones; suffixes
DE_FEMININE = {
    "Person", "Frau", "Stunde", "Minute", "Sekunde", "Woche", "Tonne", "Meile", "Unze", "Million", "Milliarde",
    "Billion", "Sache", "Stadt", "Nacht", "Tasse", "Flasche", "Seite", "Zeile", "Frage", "Antwort", "Idee", "Katze",
    "Kuh", "Hand", "Tür", "Liste", "Straße", "Familie", "Firma", "Schule", "Klasse", "Gruppe", "Aufgabe", "Stimme",
    "Sprache", "Reise", "Runde", "Portion", "Scheibe", "Tablette", "Dose", "Nummer", "Zahl", "Welt", "Zeit", "Form",
    "Farbe", "Rolle", "Chance", "Pause", "Regel", "Tochter", "Mutter", "Schwester", "Tante", "Kiste", "Tüte",
    "Stufe", "Etage", "Birne", "Banane", "Zitrone", "Tomate", "Kartoffel", "Gurke", "Brücke", "Kirche", "Insel",
    "Wand", "Kugel", "Sorte", "Karte", "Maus", "Wurst", "Bank", "Kraft", "Luft", "Wahl", "Ecke", "Kerze", "Lampe",
    "Jacke", "Hose", "Tasche", "Münze", "Note", "Folge", "Staffel", "Episode", "Datei", "Nachricht", "Blume",
    "Pflanze", "Biene", "Fliege", "Schlange", "Ente", "Ziege", "Tafel", "Packung", "Kanne", "Schüssel", "Prise",
    "Messerspitze", "Zehe", "Knolle", "Schachtel", "Fahrt", "Tat", "Art", "Mark", "Last",
}
DE_FEMININE_SUFFIXES = ("ung", "heit", "keit", "schaft", "ion", "tät", "ik", "ur", "zeit", "erin", "istin", "ei",
                        "ie", "enz", "anz")
DE_NOT_FEMININE = {"Abitur", "Ei", "Papagei", "Brei", "Schrei", "Knie", "Genie", "Start", "Gewand", "Applaus",
                   "Katholik", "Plastik", "Purpur", "Lei"}
# German years (1749 = siebzehnhundertneunundvierzig): after these words always; after the
# free cues, before a year word, or with a year word later in the clause (1749 in Frankfurt
# geboren), unless a noun follows the number (1749 Menschen, bis 1999 Autos)
DE_YEAR_CUES = {"im", "jahr", "jahre", "jahres", "anno", "baujahr", "jahrgang", "sommer", "winter", "frühjahr",
                "herbst", "frühling"}
DE_YEAR_CUES_FREE = {"seit", "bis", "von", "ab", "um", "vor", "nach", "zwischen", "anfang", "mitte", "ende",
                     "spätestens", "frühestens"}
DE_YEAR_WORDS = {"geboren", "geb", "gestorben", "gest", "verstorben", "starb", "gegründet", "gegr", "erbaut",
                 "gebaut", "errichtet", "eröffnet", "veröffentlicht", "erschienen", "entdeckt", "erfunden",
                 "komponiert", "uraufgeführt", "gemalt", "geheiratet", "heiratete", "zerstört", "eingeweiht",
                 "gekrönt", "unterzeichnet", "eingeführt", "fertiggestellt", "abgerissen", "gewählt", "entstanden"}


def de_feminine(noun: str) -> bool:
    """Whether the German noun ``noun`` is feminine (see ``DE_FEMININE``): for eine/ein."""
    if noun in DE_NOT_FEMININE:
        return False
    if noun in DE_FEMININE:
        return True
    low = noun.lower()
    if any(low.endswith(w.lower()) for w in DE_FEMININE if len(w) >= 5):
        return True
    return any(low.endswith(suf) and len(low) > len(suf) + 1 for suf in DE_FEMININE_SUFFIXES)
DE_ARTICLES_TEN = {"den", "dem", "des", "am", "im", "zum", "zur", "vom", "beim", "ab", "seit", "bis", "einem", "einen"}
ROMAN_CUES = {
    "en": {"chapter", "part", "volume", "book", "war", "act", "scene", "section", "article", "phase",
           "type", "class", "level", "vol.", "ch.", "apollo", "episode", "season", "stage"},
    "fr": {"chapitre", "partie", "tome", "livre", "acte", "scène", "article", "titre", "guerre", "type", "niveau"},
    "de": {"kapitel", "teil", "band", "buch", "akt", "szene", "artikel", "weltkrieg", "typ", "stufe", "abschnitt"},
    "es": {"capítulo", "parte", "tomo", "libro", "acto", "escena", "artículo", "título", "guerra", "tipo", "nivel",
           "siglo", "volumen"},
    "it": {"capitolo", "parte", "tomo", "libro", "atto", "scena", "articolo", "titolo", "guerra", "tipo", "livello",
           "volume"},
    "pt": {"capítulo", "parte", "tomo", "livro", "ato", "acto", "cena", "artigo", "título", "guerra", "tipo", "nível",
           "século", "volume"},
}
# ----------------------------------------------------------------------------- the pass


class _Normalizer(Rules):
    """English, French, German, Spanish, Italian, Portuguese."""

    def __init__(self, lang: str, skip: frozenset = frozenset()):
        super().__init__(lang, skip)
        L = lang
        thou = r"," if L == "en" else r"[.\u00a0\u202f ]"
        dec = r"\." if L == "en" else r","
        grouped = rf"\d{{1,3}}(?:{thou}\d{{3}})+(?:{dec}\d+)?"
        plain = rf"\d+(?:{dec}\d+)?"
        self.num = rf"(?:{grouped}|{plain})"
        money_syms = "|".join(re.escape(k) for k in sorted(MONEY[L], key=len, reverse=True))
        scales = "|".join(re.escape(k) for k in sorted(SCALE[L], key=len, reverse=True))
        # an abbreviation without its own dot (French Dr, St, Mme) only before a name
        abbrevs = "|".join(re.escape(k) if k.endswith(".") else re.escape(k) + r"(?=[ -][A-ZÀ-Þ])"
                           for k in sorted(ABBREV[L], key=len, reverse=True))
        months = "|".join(MONTHS[L])
        n = self.num
        parts: list[tuple[str, str, Callable]] = [
            ("url", r"\b(?:https?://|www\.)[^\s<>\"]*[^\s<>\".,;:!?)\]]", self.url),
            ("email", r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b", self.email),
        ]
        if L == "en":
            # feet and inches: 5'11" = five foot eleven
            parts.append(("feet", r"(?<![\w.,'\u2019\u2032])(\d{1,2}) ?['\u2019\u2032] ?(\d{1,2}) ?"
                                  r"(?:\"|''|\u201d|\u2033)(?!\w)", self.feet))
            parts.append(("time", (r"(?<![\w:.,])(\d{1,2})(?::(\d{2}))?\s*([aApP])\.?\s?[mM]\.?(?!\w)"
                                   r"|(?<![\w:.,])(\d{1,2}):(\d{2})(?![\w:]|[.,]\d)"), self.time_en))
        elif L == "fr":
            parts.append(("time", r"(?<![\w:.,])(\d{1,2}) ?(?:h|:)(\d{2})?(?![\w:]|[.,]\d)", self.time_fr))
        elif L in ROMANCE:
            parts.append(("time", r"(?<![\w:.,])(\d{1,2}) ?(?:h|:)(\d{2})?(?![\w:]|[.,]\d)", self.time_rom))
        else:
            parts.append(("time", r"(?<![\w:.,])(\d{1,2})[:.](\d{2}) ?Uhr\b|(?<![\w:.,])(\d{1,2}):(\d{2})(?: Uhr\b)?(?![\w:]|[.,]\d)", self.time_de))
        parts += [
            ("date", r"(?<![\w.,/-])(\d{4})-(\d{1,2})-(\d{1,2})(?![\w/-]|[.,]\d)", self.iso_date),
            ("ddate", r"(?<![\w.,/-])(\d{1,2})\.(\d{1,2})\.(?![\w.,]|\s*\d)", self.short_date) if L == "de" else None,
            ("date2", r"(?<![\w.,/-])(\d{1,2})([/.])(\d{1,2})([/.])(\d{4}|\d{2})(?![\w/]|[.,]\d)", self.date),
            ("version", r"(?<![\w.,])v?\d+(?:\.\d+){2,}(?![\w.,]*\d)|(?<![\w.,])v\d+(?:\.\d+)*\b", self.version),
            ("mdate", rf"(?<![\w.,])(\d{{1,2}})(?:\.|er|re|ère)? ({months})\b(?: (\d{{4}}))?" if L in ("fr", "de")
             else rf"(?<![\w.,])(\d{{1,2}})(?:\.?º|°)? (?:de )?({months})\b(?: de (\d{{4}}))?" if L in ("es", "pt")
             else rf"(?<![\w.,])(\d{{1,2}})(?:°|º)? ({months})\b(?: (\d{{4}}))?" if L == "it"
             else rf"\b({months}) (\d{{1,2}})(?:st|nd|rd|th)?\b(?:(,?) (\d{{4}})\b)?", self.month_date),
            # a quarter of a year: Q3 2025 = Q three twenty twenty-five
            ("quarter", r"(?<![\w.])Q([1-4])(?!\w)(?: ((?:1[1-9]|20)\d\d)(?!\w|[.,]\d))?", self.quarter),
            ("phone", r"(?<![\w.,/-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?|\d{2,4}[ .-])\d{2,8}(?:[ .-]\d{2,8}){0,3}(?![\w.,/-]*\d)", self.phone),
            ("money", (rf"(?<![\w.,])(-|\u2212)?({money_syms}) ?({n})(?: ?({scales})(?![\w]))?(?![\w]|[.,]\d)"
                       rf"|(?<![\w.,])(-|\u2212)?({n})(?: ?({scales})(?![\w]))? ?({money_syms})(?![\w])"), self.money),
            ("percent", rf"(?<![\w.,])(-|\u2212|\+)?({n}) ?%", self.percent),
            # a dot after the unit (5 min. then) is the abbreviation's: read, it ends the sentence or goes
            ("unit", rf"(?<![\w.,])(-|\u2212|\+)?({n}) ?({_UNIT_RE})(?![\w/])(\.(?![\w.]))?", self.unit),
            ("ordinal", r"(?<![\w.,])(\d+)(st|nd|rd|th)\b" if L == "en" else
             r"(?<![\w.,])(\d+)(\.?º|\.?ª|er\b)" if L in ("es", "pt") else
             r"(?<![\w.,])(\d+)(\.?º|\.?ª|°)(?![CF]\b)" if L == "it" else
             r"(?<![\w.,])(\d+)(ers|er|ères|ère|res|re|es|e|ème|èmes|nd|nde)\b" if L == "fr" else
             r"(?<![\w.,])(\d{1,4})\.(?= \w)", self.ordinal),
            ("fraction", r"(?<![\w.,/])(\d{1,2})/(\d{1,2})(?![\w/]|[.,]\d)", self.fraction),
            ("range", rf"(?<![\w.,-])({n})(?: ?[-\u2013] ?|\.\.(?!\.))({n})(?![\w]|[.,]\d)", self.range),
            ("roman", r"\b([IVXLC]{2,}|[IVX])(?:(er|e|ème)\b|\b(\.?))", self.roman),
            ("numabbr", rf"(?<!\w){NUMBER_ABBREV_RX.get(L) or re.escape(NUMBER_ABBREV[L][0])} ?(?=\d)",
             self.numabbr),
            ("page", rf"(?<![\w.])(?:{'|'.join(re.escape(k) for k in sorted(PAGE_ABBREV[L], key=len, reverse=True))})"
                     r" ?(?=\d)", self.page) if L in PAGE_ABBREV else None,
            ("abbr", rf"(?<![\w.])(?:{abbrevs})(?!\w)" + (r"|(?<![\w.])M\.(?= [A-ZÉ])" if L == "fr" else ""),
             self.abbr),
            ("title_en", rf"(?<![\w.])({'|'.join(EN_TITLES)})\.(?!\w)", self.dr_st) if L == "en" else None,
            # Italian 1 before a noun: un'ora, una casa, un libro, uno studente (it takes the space)
            ("one_it", r"(?<![\w.,])1 (?=[^\W\d_])", self.one_it) if L == "it" else None,
            ("per", rf"(?<=[\w€$£¥%.]) ?/ ?(?=(?:{'|'.join(PER_WHAT[L])})\b)", self.per),
            ("number", rf"(?<![\w.,])(-|\u2212|\+)?({n})(s)?(?![\w]|[.,]\d)", self.number),
        ]
        if L in ROMANCE:
            # money before phone (25.000 € is money, not a phone number); Italian 1° before units
            names = [p[0] if p else None for p in parts]
            parts.insert(names.index("phone"), parts.pop(names.index("money")))
            if L == "it":
                names = [p[0] if p else None for p in parts]
                parts.insert(names.index("unit"), parts.pop(names.index("ordinal")))
        if L == "de":
            parts.insert(-1, ("street_de", r"\b([A-ZÄÖÜ]\w+)str\.(?=\s|$)", self.street_de))
        self._compile(parts)

    def may_change(self, text: str) -> bool:
        return any(c.isdigit() or c in "@$€£¥%°./" for c in text) \
            or re.search(r"[A-Z][a-z]*\.|\b[IVXLC]+\b", text) is not None

    # --------------------------------------------------------------- helpers
    def per(self, s, g, m):
        """The slash of a rate (12 €/month, 20 $/hour): read as "per"."""
        return f" {PER[self.lang]} "

    def street_de(self, s, g, m):
        return g[0] + "straße"

    def _num(self, s: str) -> str:
        if self._too_long(s):
            raise ValueError(s)
        return number(s, self.lang)

    @staticmethod
    def _is_one(s: str) -> bool:
        return s.strip() in ("1",)

    # --------------------------------------------------------------- rules
    def url(self, s, g, m):
        core = re.sub(r"^https?://", "", s)
        return self._spell_address(core)

    def email(self, s, g, m):
        return self._spell_address(s.replace("@", " @ "))

    def _spell_address(self, s: str) -> str:
        L = self.lang
        words = {"en": {".": "dot", "/": "slash", "@": "at", "-": "dash", "_": "underscore", ":": "colon",
                        "?": "question mark", "=": "equals", "&": "and", "+": "plus", "#": "hash", "~": "tilde",
                        "%": "percent"},
                 "fr": {".": "point", "/": "slash", "@": "arobase", "-": "tiret", "_": "tiret bas", ":": "deux-points",
                        "?": "point d'interrogation", "=": "égal", "&": "et", "+": "plus", "#": "dièse",
                        "~": "tilde", "%": "pour cent"},
                 "de": {".": "Punkt", "/": "Schrägstrich", "@": "at", "-": "Bindestrich", "_": "Unterstrich",
                        ":": "Doppelpunkt", "?": "Fragezeichen", "=": "gleich", "&": "und", "+": "plus",
                        "#": "Raute", "~": "Tilde", "%": "Prozent"},
                 "es": {".": "punto", "/": "barra", "@": "arroba", "-": "guion", "_": "guion bajo", ":": "dos puntos",
                        "?": "interrogación", "=": "igual", "&": "y", "+": "más", "#": "almohadilla",
                        "~": "virgulilla", "%": "por ciento"},
                 "it": {".": "punto", "/": "barra", "@": "chiocciola", "-": "trattino", "_": "trattino basso",
                        ":": "due punti", "?": "punto interrogativo", "=": "uguale", "&": "e", "+": "più",
                        "#": "cancelletto", "~": "tilde", "%": "per cento"},
                 "pt": {".": "ponto", "/": "barra", "@": "arroba", "-": "hífen", "_": "sublinhado", ":": "dois pontos",
                        "?": "ponto de interrogação", "=": "igual", "&": "e", "+": "mais", "#": "cardinal",
                        "~": "til", "%": "por cento"}}[L]
        out = []
        for tok in re.findall(r"[^\W\d_]+|\d+|\S", s):
            if tok.isdigit():
                out.append(digits(tok, L) if len(tok) > 4 or tok[0] == "0" else card(int(tok), L))
            elif tok in words:
                out.append(words[tok])
            elif tok.strip():
                out.append(tok)
        return " ".join(out)

    def phone(self, s, g, m):
        groups = re.findall(r"\d+", s)
        marked = s.lstrip().startswith(("+", "(")) or groups[0].startswith("0") or len(groups) >= 3
        if self.lang == "en" and re.fullmatch(r"\d{3}-\d{4}", s):  # a US local number: 555-1234
            return ", ".join(digits(x, "en") for x in groups)
        if sum(len(x) for x in groups) < 7 or not marked or (len(groups) == 2 and not s.lstrip().startswith("+")
                                                              and not groups[0].startswith("0")):
            return self._fallback("phone", s, m)
        L = self.lang
        plus = s.strip().startswith("+")
        read = []
        for i, grp in enumerate(groups):
            if L == "fr" and len(grp) == 2 and not (plus and i == 0):
                read.append(digits(grp, L) if grp[0] == "0" else card(int(grp), L))
            else:
                read.append(digits(grp, L))
        out = ", ".join(read)
        return ("plus " if plus else "") + out

    def version(self, s, g, m):
        L = self.lang
        if L != "en" and re.fullmatch(r"\d{1,3}(?:\.\d{3})+", s):
            return self._num(s)  # 1.000.000: thousands
        v = s.startswith("v")
        parts = s.lstrip("v").split(".")
        if any(self._too_long(p) for p in parts):
            return None
        head = {"en": "version ", "fr": "version ", "de": "Version ", "es": "versión ", "it": "versione ",
                "pt": "versão "}[L] if v else ""
        return head + f" {DOT[L]} ".join(integer(p, L) for p in parts)

    def time_en(self, s, g, m):
        if g[0] is not None:
            h, mi, ap = int(g[0]), g[1], g[2].upper()
            if not 1 <= h <= 12 or (mi is not None and int(mi) > 59):
                return None
            out = f"{self._clock_en(h, int(mi or 0), True)} {ap}M"
            return out + "." if s.endswith(".") and self._sentence_end(m) else out
        h, mi = int(g[3]), int(g[4])
        if h > 23 or mi > 59:
            return None
        return self._clock_en(h, mi, False)

    @staticmethod
    def _clock_en(h: int, mi: int, ampm: bool) -> str:
        if mi == 0:
            return card(h, "en") if ampm or h > 12 else f"{card(h, 'en')} o'clock"
        if mi < 10:
            return f"{card(h, 'en')} oh {card(mi, 'en')}"
        return f"{card(h, 'en')} {card(mi, 'en')}"

    def time_fr(self, s, g, m):
        h, mi = int(g[0]), g[1]
        if "h" not in s and mi is None:
            return None
        if h > 24 or (mi is not None and int(mi) > 59):
            return None
        hours = "une heure" if h == 1 else f"{card(h, 'fr')} heures"
        if h == 21:
            hours = "vingt et une heures"
        return hours + (f" {card(int(mi), 'fr')}" if mi is not None and int(mi) else "")

    def time_rom(self, s, g, m):
        """14:30 / 14h30: es catorce y treinta, it quattordici e trenta, pt catorze e trinta;
        a full hour (14h, 14:00): es catorce horas, it quattordici (3h: tre ore), pt catorze horas."""
        L = self.lang
        h, mi = int(g[0]), g[1]
        if "h" not in s and mi is None:
            return None
        if h > 24 or (mi is not None and int(mi) > 59):
            return None
        hours = gendered(card(h, L), L, True)  # la una, vinte e duas (horas)
        if mi is not None and int(mi):
            mins = card(int(mi), L)
            return f"{hours} {'y' if L == 'es' else 'e'} {mins}"
        if L == "it":  # 14:00 quattordici; 3h (a duration) tre ore
            return ("un'ora" if h == 1 else f"{hours} ore") if "h" in s else hours
        return f"{hours} {'hora' if h == 1 else 'horas'}"

    def time_de(self, s, g, m):
        h, mi = (g[0], g[1]) if g[0] is not None else (g[2], g[3])
        h, mi = int(h), int(mi)
        if h > 24 or mi > 59:
            return None
        hours = "ein" if h == 1 else card(h, "de")
        return f"{hours} Uhr" + (f" {card(mi, 'de')}" if mi else "")

    def iso_date(self, s, g, m):
        y, mo, d = int(g[0]), int(g[1]), int(g[2])
        if not valid_date(d, mo, y):
            return None
        return date_words(d, mo, y, self.lang, self._de_case(m))

    def _de_case(self, m) -> str:
        p = self._prev_word(m).lower()
        if p in DE_ARTICLES_TEN:
            return "en"
        if p in DE_ARTICLES_TE:
            return "e"
        return "er"

    def date(self, s, g, m):
        a, sep, b, sep2, y = int(g[0]), g[1], int(g[2]), g[3], g[4]
        if sep != sep2:
            return None
        if self.lang == "en" and sep == ".":
            return None if len(y) == 4 else self._fallback("date2", s, m)
        if self.lang == "de" and sep == "/" and len(y) == 2:
            return None
        yy = int(y) if len(y) == 4 else 2000 + int(y)
        mo, d = (a, b) if self.lang == "en" else (b, a)
        if not valid_date(d, mo, yy):
            return self._fallback("date2", s, m) if sep == "." and len(y) != 4 else None
        return date_words(d, mo, yy, self.lang, self._de_case(m))

    def short_date(self, s, g, m):
        """German ``24.12.`` (day.month. without the year)."""
        d, mo = int(g[0]), int(g[1])
        if not valid_date(d, mo, None):
            return None
        out = date_words(d, mo, None, "de", self._de_case(m))
        return out + "." if self._sentence_end(m) else out

    def month_date(self, s, g, m):
        L = self.lang
        if L == "en":
            mo, d, y = MONTHS["en"].index(g[0]) + 1, int(g[1]), g[3]
            if not valid_date(d, mo, int(y) if y else None):
                return None
            out = date_words(d, mo, None, L)
            return out + (f"{g[2]} {year(int(y), L)}" if y else "")
        else:
            d, mo, y = int(g[0]), MONTHS[L].index(g[1]) + 1, g[2]
            if L == "de" and not re.match(r"\d+\. ", s):
                # "3 Mai" without the ordinal dot: not the German way of writing a date
                return None
        if not valid_date(d, mo, int(y) if y else None):
            return None
        out = date_words(d, mo, int(y) if y else None, L, self._de_case(m))
        if L == "es" and d == 1 and re.match(r"1\.?[º°]", s):
            out = "primero" + out[3:]  # 1.º de mayo: primero de mayo (1 de mayo: uno de mayo)
        return out

    def _money_words(self, amount: str, sym: str, scale: str | None, neg: bool) -> str:
        L = self.lang
        one, many, c1, cn = MONEY[L][sym]
        sign = MINUS[L] + " " if neg else ""
        if L in ROMANCE:
            return sign + self._money_rom(amount, sym, scale)
        if scale:
            sc = SCALE[L][scale]
            if L == "en":
                return f"{sign}{self._num(amount)} {sc} {many}"
            if L == "fr":
                plural = sc if sc == "mille" else (sc if sc.endswith("s") or amount in ("1",) else sc + "s")
                if amount == "1" and sc.endswith("s"):
                    plural = sc[:-1]
                elif amount != "1" and not plural.endswith("s") and sc != "mille":
                    plural = sc + "s"
                de = "d'" if many[0] in "aeiouéèê" else "de "
                return f"{sign}{self._num(amount)} {plural} {de}{many}"
            return f"{sign}{self._num(amount)} {sc} {many}"
        dec = "." if L == "en" else ","
        thou = "," if L == "en" else "."
        whole, frac = (amount.rsplit(dec, 1) + [""])[:2] if dec in amount else (amount, "")
        if frac and len(frac) != 2:
            return f"{sign}{self._num(amount)} {many}"
        w = whole.replace(thou, "").replace(" ", "").replace("\u00a0", "").replace("\u202f", "")
        if self._too_long(w):
            raise ValueError(amount)
        n_whole = int(w)
        cents = int(frac) if frac else 0
        if L == "de" and n_whole == 1:
            head = f"ein {one}"
        elif L == "fr" and n_whole == 1:
            head = f"un {one}"
        else:
            head = f"{card(n_whole, L)} {one if n_whole == 1 else many}"
        if not cents:
            return sign + head
        if n_whole == 0 and c1:
            return f"{sign}{card(cents, L)} {c1 if cents == 1 else cn}"
        if L == "en":
            return f"{sign}{head} and {card(cents, L)} {c1 if cents == 1 else cn}" if c1 else sign + head
        return f"{sign}{head} {card(cents, L)}"

    def _money_rom(self, amount: str, sym: str, scale: str | None) -> str:
        L = self.lang
        one, many, c1, cn = MONEY[L][sym]
        fem = one in MONEY_FEMININE
        if scale:
            sc = SCALE[L][scale]
            if sc in ("mil", "mila"):
                return f"{self._num(amount)} {sc} {many}"
            if self._is_one(amount):
                sc = {"es": "millón", "it": "milione", "pt": "milhão"}[L]
                head = {"es": "un", "it": "un", "pt": "um"}[L]
            else:
                head = self._num(amount)
            return f"{head} {sc} {'di' if L == 'it' else 'de'} {many}"
        whole, frac = amount.rsplit(",", 1) if "," in amount else (amount, "")
        if frac and len(frac) != 2:
            return f"{self._num(amount)} {many}"
        w = whole.replace(".", "").replace(" ", "").replace("\u00a0", "").replace("\u202f", "")
        if self._too_long(w):
            raise ValueError(amount)
        n_whole, cents = int(w), int(frac) if frac else 0
        head = f"{gendered(card(n_whole, L), L, fem)} {one if n_whole == 1 else many}"
        if not cents or not c1:
            return head
        tail = f"{gendered(card(cents, L), L, False)} {c1 if cents == 1 else cn}"
        if n_whole == 0:
            return tail
        return f"{head} {'con' if L == 'es' else 'e'} {tail}"

    def money(self, s, g, m):
        if g[1] is not None:
            neg, sym, amount, scale = g[0], g[1], g[2], g[3]
        else:
            neg, amount, scale, sym = g[4], g[5], g[6], g[7]
        return self._money_words(amount, sym, scale, bool(neg))

    def percent(self, s, g, m):
        L = self.lang
        sign = {"-": MINUS[L] + " ", "\u2212": MINUS[L] + " ", "+": "plus "}.get(g[0] or "", "")
        return f"{sign}{self._num(g[1])} {PERCENT[L]}"

    def unit(self, s, g, m):
        neg, amount, u, dot = g
        body = s[:-1] if dot else s
        if u in ("m", "l", "g", "mi", "V", "W", "ft") and body[len(body) - len(u) - 1:][0:1] != " " \
                and not re.search(r"\d$", body[: -len(u)]):
            return None
        # the abbreviation's dot: kept where it ends the sentence (5 min. Then), else read with it
        end = "." if dot and self._sentence_end(m) else ""
        return self._unit_words(neg, amount, u) + end

    def _unit_words(self, neg, amount, u) -> str:
        L = self.lang
        one, many = UNITS[u][L]
        sign = (PLUS[L] if neg == "+" else MINUS[L]) + " " if neg else ""
        if L in ROMANCE:
            fem = one.split()[0] in ROMANCE_FEMININE
            if self._is_one(amount):
                return f"{sign}{gendered(card(1, L), L, fem)} {one}"
            words = self._num(amount)
            if re.fullmatch(r"[\d.\s\u00a0\u202f]+", amount):
                words = gendered(words, L, fem)
            return f"{sign}{words} {many}"
        if self._is_one(amount):
            word = {"en": "one", "fr": "un", "de": "ein"}[L]
            if L == "fr" and one.split()[0] in ("minute", "seconde", "milliseconde", "livre", "once", "heure"):
                word = "une"
            if L == "de" and de_feminine(one.split()[0]):
                word = "eine"
            return f"{sign}{word} {one}"
        return f"{sign}{self._num(amount)} {many}"

    def ordinal(self, s, g, m):
        L = self.lang
        n = int(g[0])
        if self._too_long(g[0]):
            return None
        if L == "en":
            suffix = g[1]
            want = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
            if suffix != want:
                return None
            return ordinal(n, "en")
        if L in ROMANCE:
            suf = g[1]
            if L == "it" and suf == "°" and self._prev_word(m).lower() not in IT_ORDINAL_CUES:
                return self._fallback("ordinal", s, m)  # 20° is a degree
            w = ordinal(n, L)
            if suf.endswith("ª"):
                return feminine_ordinal(w)
            if suf == "er":  # es 1er, 3er: primer, tercer (before a noun)
                return w[:-1] if w.endswith(("primero", "tercero")) else None
            return w
        if L == "fr":
            suf = g[1]
            if n == 1:
                if suf in ("er", "ers"):
                    return "premier" + ("s" if suf == "ers" else "")
                if suf in ("re", "ère", "res", "ères"):
                    return "première" + ("s" if suf.endswith("s") else "")
                return None
            if suf in ("er", "re", "ère", "ers", "res", "ères"):
                return None
            if suf in ("nd", "nde"):
                return "second" if suf == "nd" else "seconde"
            w = ordinal(n, "fr")
            return w + ("s" if suf.endswith("s") else "")
        # German "3." after an article (der dritte / am dritten); else a number ending a sentence
        p = self._prev_word(m).lower()
        if p in DE_ARTICLES_TE:
            return de_ordinal(n, "e")
        if p in DE_ARTICLES_TEN:
            return de_ordinal(n, "en")
        return self._fallback("ordinal", s, m)

    def fraction(self, s, g, m):
        a, b = int(g[0]), int(g[1])
        L = self.lang
        p = self._prev_word(m).lower()
        cues = DATE_CUES_EN if L == "en" else DATE_CUES_FR if L == "fr" else DATE_CUES_ROMANCE[L] if L in ROMANCE \
            else DE_ARTICLES_TEN | DE_ARTICLES_TE
        if p in cues:
            mo, d = (a, b) if L == "en" else (b, a)
            if not valid_date(d, mo, None):
                return None
            return date_words(d, mo, None, L, self._de_case(m))
        if (a, b) in NOT_FRACTIONS:  # 24/7: twenty-four seven
            return f"{card(a, L)} {card(b, L)}"
        if L == "en" and (a, b) in EN_NOT_FRACTIONS:
            return EN_NOT_FRACTIONS[a, b]
        if b < 2 or a == 0:
            return None
        return fraction(a, b, L)

    def range(self, s, g, m):
        a, b = g
        L = self.lang
        if self._too_long(a) or self._too_long(b):
            return None
        p = self._prev_word(m).lower()

        # German years in brackets, a lifespan: Goethe (1749–1832)
        bracket = L == "de" and m.string[:m.start()].endswith("(") and self._next_text(m).startswith(")")

        def side(x):
            if re.fullmatch(r"\d{4}", x) and 1100 <= int(x) <= 2099 and (
                    L == "en" or bracket
                    or p in ("von", "zwischen", "jahre", "jahren", "im", "seit", "de", "entre", "en")):
                return year(int(x), L)
            return number(x, L)

        if L == "fr":
            return f"{side(a)} {TO[L]} {side(b)}" if p != "de" else f"{side(a)} à {side(b)}"
        return f"{side(a)} {TO[L]} {side(b)}"

    def roman(self, s, g, m):
        L = self.lang
        numeral, suffix, dot = g
        dot = dot or ""
        if suffix and L != "fr":
            return None
        v = roman_value(numeral)
        if v is None:
            return None
        p = self._prev_word(m)
        if L == "fr" and suffix:
            w = "premier" if v == 1 else ordinal(v, "fr")
            return w
        if not p or not p[0].isupper() and p.lower() not in ROMAN_CUES[L]:
            return None
        if len(numeral) == 1 and p.lower() not in ROMAN_CUES[L] and not (L == "de" and dot):
            return None  # "I", "V", "X" alone: a pronoun or a letter unless a cue word comes before
        if p.lower().rstrip(".") in ROMAN_CUES[L] or p.lower() in ROMAN_CUES[L]:
            return card(v, L) + dot
        if p.isupper() or not p.isalpha():
            return None
        if L == "en":
            return f"the {ordinal(v, 'en').capitalize()}" + dot
        if L == "fr":
            return ("premier" if v == 1 else card(v, "fr")) + dot
        if L in ROMANCE:  # Felipe II: segundo; Alfonso XIII: trece (es, pt); Luigi XIV: quattordicesimo
            return (ordinal(v, L) if v <= 10 or L == "it" else card(v, L)) + dot
        if not dot:
            return None
        return f"der {de_ordinal(v, 'e').capitalize()}" + self._sentence_dot(m)

    def _sentence_dot(self, m) -> str:
        """Keep the numeral's dot when it ends the text (German ``Ludwig XIV.``)."""
        return "." if not self._next_text(m).strip() else ""

    def _sentence_start(self, m) -> bool:
        before = m.string[:m.start()].rstrip()
        return not before or re.search(r"[.!?:\n][\"'\u201d\u2019)\]]*$", before) is not None

    def _cap(self, w: str, s: str, m) -> str:
        """``w`` capitalized where the abbreviation ``s`` it reads was, at the start of a sentence
        (German nouns always are)."""
        return w[0].upper() + w[1:] if s[0].isupper() and self._sentence_start(m) else w

    def numabbr(self, s, g, m):
        return self._cap(NUMBER_ABBREV[self.lang][1], s, m) + " "

    def page(self, s, g, m):
        return self._cap(PAGE_ABBREV[self.lang][s.rstrip()], s, m) + " "

    def quarter(self, s, g, m):
        return f"Q {card(int(g[0]), self.lang)}" + (f" {year(int(g[1]), self.lang)}" if g[1] else "")

    def feet(self, s, g, m):
        ft, inch = int(g[0]), int(g[1])
        if inch > 11:
            return None
        if inch == 0:
            return "one foot" if ft == 1 else f"{card(ft, 'en')} feet"
        return f"{card(ft, 'en')} foot {card(inch, 'en')}"

    def abbr(self, s, g, m):
        L = self.lang
        if L == "fr" and s == "M.":
            return "Monsieur"
        word = ABBREV[L][s]
        if L in ROMANCE:  # a title before a name keeps no dot; etc./ecc. at the end of a sentence does
            nxt = self._next_text(m)
            end = not nxt.strip() or (s in ROMANCE_MAY_END_SENTENCE and re.match(r"\s+[A-ZÀ-ÖØ-Þ]", nxt) is not None)
            return word + "." if end else word
        if s.endswith(".") and self._ends_sentence(m):
            return word + "."
        return word

    def _sentence_end(self, m) -> bool:
        nxt = m.string[m.end():]
        return not nxt.strip() or re.match(r"\s+[A-ZÀ-ÖØ-Þ]", nxt) is not None

    def _ends_sentence(self, m) -> bool:
        nxt = self._next_text(m)
        return not nxt.strip() or (re.match(r"\s+[A-ZÀ-ÖØ-Þ]", nxt) is not None
                                   and m.string[m.start():m.end()] in MAY_END_SENTENCE)

    def dr_st(self, s, g, m):
        which = g[0]
        nxt = self._next_text(m)
        prev = self._prev_word(m)
        next_cap = re.match(r"\s+[A-Z]", nxt) is not None
        prev_name = bool(prev) and (prev[0].isupper() or prev[0].isdigit()) and not prev.endswith(".")
        if which == "Dr":
            word = "Doctor" if next_cap or not prev_name else "Drive"
        else:
            word = "Street" if prev_name or not next_cap else "Saint"
        if word in ("Drive", "Street") and (not nxt.strip() or next_cap):
            return word + "."
        return word

    def number(self, s, g, m):
        L = self.lang
        neg, n, plural_s = g
        if self._too_long(n):
            return None
        sign = (PLUS[L] if neg == "+" else MINUS[L]) + " " if neg else ""
        noun = re.match(r" ([A-ZÄÖÜ][a-zäöüß][\w-]*)", m.string[m.end():]) if L == "de" else None
        if noun and n == "1" and not neg:
            return "eine" if de_feminine(noun.group(1)) else "ein"
        if neg:
            before = m.string[:m.start()]
            if before and not before[-1].isspace() and before[-1] not in "([{\"'":
                return None
        p = self._prev_word(m)
        if L == "en" and n in EMERGENCY_NUMBERS and not neg and plural_s is None and p.lower() in EMERGENCY_CUES:
            return digits(n, "en")  # call 911: nine one one
        if re.fullmatch(r"\d{4}", n) and 1100 <= int(n) <= 2099 and not neg:
            is_year = (L == "en" and (p.lower() in YEAR_CUES or p in MONTHS["en"] or plural_s is not None
                                      or re.match(r"\s*(AD|BC|BCE|CE)\b", self._next_text(m)) is not None)) \
                or (L == "de" and (p.lower() in DE_YEAR_CUES or p in MONTHS["de"]
                                   or (noun is None and self._de_year_context(p, m))))
            if is_year:
                w = year(int(n), L)
                if plural_s:
                    return _plural_year(w)
                return w
        if plural_s is not None:
            if L == "en" and n.endswith("0"):
                return _plural_year(year(int(n), L) if len(n) == 4 else self._num(n))
            return None
        if L in ("es", "pt") and not neg:
            noun = self._romance_noun(m)
            if noun and (noun.endswith("s") or self._is_one(n)) and re.fullmatch(r"[1-9][\d.\u00a0\u202f ]*", n):
                return gendered(self._num(n), L, romance_feminine(noun, L))
        return sign + self._num(n)

    def _romance_noun(self, m) -> str | None:
        """The noun a Spanish/Italian/Portuguese number counts: the next word, in lower case,
        unless it is a function word or the number is a name (capítulo 1, página 21)."""
        # 2 mil pessoas: the noun after the thousands (duas mil pessoas, doscientas mil personas)
        nxt = re.match(r" ?(?:mil )?([^\W\d_]+)(?![\w'])", self._next_text(m))
        if not nxt or not nxt.group(1).islower():
            return None
        word, L = nxt.group(1), self.lang
        if word in ROMANCE_FUNCTION_WORDS[L] or self._prev_word(m).lower() in ROMANCE_LABELS[L] | ROMAN_CUES[L]:
            return None
        return word

    def one_it(self, s, g, m):
        noun = self._romance_noun(m)
        if noun is None:
            return self._fallback("one_it", s, m)
        if romance_feminine(noun, "it"):
            return "un'" if noun[0] in "aeiouàèéìòóù" else "una "
        if re.match(r"s[^aeiouàèéìòóù]|z|gn|ps|pn|x|y", noun):
            return "uno "
        return "un "


    def _de_year_context(self, p: str, m) -> bool:
        """A German number (no noun after it) is a year after a free cue (seit, bis, um...) or
        a year word (geboren 1749), or with a year word later in its clause (1749 geboren,
        1749 in Frankfurt geboren)."""
        if p.lower() in DE_YEAR_CUES_FREE or p.lower().rstrip(".") in DE_YEAR_WORDS:
            return True
        clause = re.split(r"[,;:!?()\n]|\.(?=\s|$)", self._next_text(m), maxsplit=1)[0]
        return any(w.lower() in DE_YEAR_WORDS for w in re.findall(r"\w+", clause)[:8])


# abbreviations of the tables above that are also ordinary words or unit symbols (Italian es.
# = esempio, but German es.; French MM. = Messieurs, but mm.): their dot may end a sentence
_ALSO_WORDS = {"es", "mm"}


def abbreviations_before_names() -> frozenset[str]:
    """Words (in lower case, without their final dot) whose dot the rules read as an
    abbreviation's, not as the end of a sentence, when a name or a number follows: the
    one-word titles and abbreviations of every language's tables (``ABBREV``, the number and
    page abbreviations, English ``Dr.``/``St.``, the Russian ``ABBREV`` and
    ``ABBREV_BEFORE_NUMBER``), less those that may end a sentence (``MAY_END_SENTENCE``, the
    Russian ``ABBREV_ENDS``) and those that are also ordinary words (``_ALSO_WORDS``). A
    sentence splitter (:mod:`vocalis.wyoming`) keeps ``Dr. Smith`` whole with it."""
    out: set[str] = set()

    def add(keys, ends=()) -> None:
        out.update(k[:-1].lower() for k in keys if k.endswith(".") and " " not in k and k not in ends)

    for L, table in ABBREV.items():
        add(table, ROMANCE_MAY_END_SENTENCE if L in ROMANCE else MAY_END_SENTENCE)
    add(v[0] for v in NUMBER_ABBREV.values())
    add(("núm.",))  # Spanish, in NUMBER_ABBREV_RX
    for table in PAGE_ABBREV.values():
        add(table)
    add(t + "." for t in EN_TITLES)
    add(ru.ABBREV, ru.ABBREV_ENDS)
    add(ru.ABBREV_BEFORE_NUMBER)
    return frozenset(out - _ALSO_WORDS)


def _plural_year(w: str) -> str:
    """'nineteen ninety' -> 'nineteen nineties'; 'eighty' -> 'eighties'."""
    if w.endswith("y"):
        return w[:-1] + "ies"
    return w + "s"


_cache: dict[str, Rules] = {}


def _rules(lang: str) -> Rules:
    """The rules of a supported language code."""
    if lang == "ru":
        return RussianRules(lang)
    if lang in ("ja", "ko"):
        return CjkRules(lang)
    return _Normalizer(lang)


def warm(languages=SUPPORTED) -> None:
    """Build the rules of ``languages`` now (the num2words import and the compilation of
    every language's patterns, a noticeable delay for a first request; figures:
    docs/normalization.md), so that no request pays for it; ``vocalis serve`` and
    ``vocalis wyoming`` call it at start-up."""
    for lang in languages:
        normalize("1", lang)


def normalize(text: str, language: str | None = "en") -> str:
    """``text`` with numbers, dates, times, money, units and abbreviations as words.

    ``language``: a code or name (``en``/``english``, ``fr``/``french``, ``de``/``german``,
    ``es``/``spanish``, ``it``/``italian``, ``pt``/``portuguese``, ``ru``/``russian``,
    ``ja``/``japanese``, ``ko``/``korean``, any case) or ``auto`` (English, unless the text
    holds letters of a non-Latin script: then it is returned unchanged). Spaces and
    everything not read are kept as written.

    Raises:
        InputError: ``text`` is not a string, or the language is not covered (names the
        supported ones).
    """
    if not isinstance(text, str):
        raise InputError(f"text must be a string, got {type(text).__name__}", param="input")
    lang = resolve_language(language)
    if lang is None:
        if _other_script(text):
            return text
        lang = "en"
    norm = _cache.get(lang)  # built once per language (a benign race builds it twice)
    if norm is None:
        norm = _cache[lang] = _rules(lang)
    if not norm.may_change(text):
        return text
    # A reading can put words next to what is left (``9°@a.m`` -> ``nine degrees@a.m``),
    # which a second pass would read: repeat until nothing changes (normally one pass).
    out = norm(text)
    for _ in range(3):
        again = norm(out)
        if again == out:
            break
        out = again
    return out


__all__ = ["SUPPORTED", "abbreviations_before_names", "normalize", "resolve_language", "supports", "warm"]
