"""Russian text normalization (``ru``): the rules :func:`vocalis.text.normalize.normalize`
runs for Russian.

Number words come from ``num2words`` 0.5.14 (``lang="ru"``, which inflects cardinals and
ordinals by case and gender); which form a number takes is decided here from its context,
following the grammar of numerals as Rosenthal's handbook states it (Д. Э. Розенталь,
«Справочник по правописанию и литературной правке», sections on numerals and their agreement
with nouns) and the usual ways of saying dates, times and phone numbers:

* Cardinals in the nominative (двадцать пять), in the genitive after a preposition or word
  that asks for it (до, от, из, около/ок., после, без, для, у, более, менее, больше, меньше,
  свыше, кроме, среди, вместо; с only in "с ... до"): до трёх процентов. **Not inflected**:
  the dative (к), instrumental (с, между, над), prepositional (о, при, в) and the accusative of
  a masculine animate noun; those are read in the nominative.
* One and two agree in gender (один/одна/одно, два/две) with a unit, currency or percent, and
  for any other next word by its ending: after 1, a noun in -а/-я is feminine (одна минута), in
  -о/-е neuter (одно окно), in -у/-ю a feminine accusative (одну минуту); after 2, a noun in
  -ы/-и, or an adjective in -ые/-ие, is feminine (две недели, две новые книги). Wrong for
  masculine nouns in -а (мужчина) and feminine nouns in -ь (ночь), read masculine, and for an
  adjective between 1 and its noun.
* The noun after a number (units, currencies, percent, scale words): 1 рубль, 2-4 рубля, 5-20
  рублей, 21 рубль...; after a decimal the genitive singular (2,5 килограмма); in the genitive
  рубля (after 1) or рублей.
* 1000-1999 start with тысяча, as said (not одна тысяча).
* Decimal comma: 3,14 = три целых четырнадцать сотых (up to six decimals; more are left as
  written). A decimal point (3.14) is not Russian and is left as written.
* Thousands separated by a space, a no-break space or a narrow no-break space (1 000 000).
* Dates dd.mm.yyyy, dd/mm/yyyy, yyyy-mm-dd and "12 мая [2026 [года|г.]]": the day an ordinal
  (neuter) in the genitive, the date of an event (родился двенадцатого мая); in the
  nominative after сегодня, завтра, вчера, дата, на, по, a colon or a dash (сегодня первое
  сентября); in the dative after к; in the instrumental after перед, между. The year is an
  ordinal in the genitive followed by года.
* Years before год/года/году/годом/годе/г.: ordinals in that noun's case (в 2026 году = в
  две тысячи двадцать шестом году; году is prepositional after в, о, при, else dative); "г."
  after a year takes the case its preposition asks (в: году; к: году, dative; за, на, через:
  год; otherwise года). Numbers of one or two digits before год are durations (два года).
* Ordinals written with an ending (5-й, 2-я, 3-е, 10-го, 3-м, 1990-х, 5-ю...): the ending
  gives gender, number and case; -м is prepositional after в/на/о/при, else instrumental; -й
  is read masculine nominative (it may also be a feminine oblique case); -е is plural after a
  multiple of ten with four digits or before годы (1990-е), else neuter.
* Times 14:30 = четырнадцать тридцать, 7:05 = семь ноль пять, 9:00 = девять часов (genitive
  after до, с ... до: с девяти часов до восемнадцати часов).
* Money: рубль (₽, руб., р., RUB), копейка (коп.), доллар ($, USD), евро (€, EUR), фунт
  (£, GBP), иена (¥, JPY), before or after the amount: 3,50 ₽ = три рубля пятьдесят копеек;
  with тыс., млн, млрд, трлн (5 млн руб. = пять миллионов рублей). Money is the one place a
  decimal point is read, as written in prices with cents: $3.50 = три доллара пятьдесят центов.
* A sign: +5 = плюс пять. 24/7 = двадцать четыре на семь. A dot after a unit (5 мин. и) is
  read with it, kept where it ends the sentence.
* Fractions: 3/4 = три четвёртых, 1/2 = одна вторая.
* Ranges: 10-20 = десять-двадцать, as said for an approximate number (2–3 дня = два-три
  дня, 10-20 км = десять-двадцать километров); both sides take the gender the noun asks of
  the second.
* Phone numbers: groups of up to three digits read as numbers (сорок пять), as Russians say
  them; a group with a leading zero or of four digits or more digit by digit.
* Roman numerals: before век/съезд in that noun's case (в XIX веке = в девятнадцатом веке);
  after глава, часть, том, раздел, книга... in their gender (глава третья); after a name
  ending in a consonant, й or ь (Пётр I = Пётр Первый). A name in -а/-я is left as written
  (Екатерина II and the genitive Петра I look alike); a lone numeral too.
* Abbreviations: т. е., т. д., т. п., т. к., т. н., т. ч., и др., г. (город, before a name),
  ул., пр-т, пер., пл., д./кв./стр. (before a number), рис., см., табл., им., напр., ок.,
  тел., проф., акад., доц., г-н, г-жа, д-р, №; unit symbols of ГОСТ 8.417 (км, кг, мл, км/ч...;
  м², км², м³ with their adjective: два квадратных метра, 2,5 квадратного метра).
* Emails and URLs spelled: @ собака, . точка, / слэш.
"""

from __future__ import annotations

import re

from vocalis.text.rules import Rules, number_words, roman_value, valid_date

DIGITS = ["ноль", "один", "два", "три", "четыре", "пять", "шесть", "семь", "восемь", "девять"]
MONTHS_GEN = ["января", "февраля", "марта", "апреля", "мая", "июня", "июля", "августа", "сентября",
              "октября", "ноября", "декабря"]

# Words and prepositions after which a number is read in the genitive
GENITIVE_CUES = {"до", "от", "из", "около", "ок.", "после", "без", "для", "у", "более", "менее", "больше",
                 "меньше", "свыше", "кроме", "среди", "вместо", "против", "из-за", "возле", "вокруг"}
# A date's day is nominative after these (or a colon or a dash), dative after к, instrumental
# after перед/между, genitive otherwise
DATE_NOMINATIVE = {"сегодня", "завтра", "вчера", "послезавтра", "позавчера", "дата", "на", "по"}
PREPOSITIONAL = {"в", "во", "о", "об", "обо", "при", "на"}
# words after a number that are not the noun it counts (their ending says nothing of gender)
FUNCTION_WORDS = {"для", "или", "это", "она", "оно", "они", "что", "как", "где", "уже", "еще", "ещё", "тоже",
                  "также", "либо", "чтобы", "через", "перед", "между", "около", "после", "из-за", "при", "под",
                  "над", "без", "про", "ибо", "когда", "если", "разве", "почти", "более", "менее", "примерно"}

# noun forms: (nominative singular, genitive singular, genitive plural), gender
CURRENCIES = {
    "rub": (("рубль", "рубля", "рублей"), "m"), "kop": (("копейка", "копейки", "копеек"), "f"),
    "usd": (("доллар", "доллара", "долларов"), "m"), "eur": (("евро", "евро", "евро"), "m"),
    "gbp": (("фунт", "фунта", "фунтов"), "m"), "jpy": (("иена", "иены", "иен"), "f"),
}
CENTS = {"rub": "kop", "usd": "cent", "eur": "cent", "gbp": "penny"}
SUBUNITS = {"kop": (("копейка", "копейки", "копеек"), "f"), "cent": (("цент", "цента", "центов"), "m"),
            "penny": (("пенс", "пенса", "пенсов"), "m")}
SIGNS_BEFORE = {"₽": "rub", "$": "usd", "€": "eur", "£": "gbp", "¥": "jpy"}
SIGNS_AFTER = {**SIGNS_BEFORE, "руб.": "rub", "руб": "rub", "р.": "rub", "RUB": "rub", "коп.": "kop",
               "USD": "usd", "EUR": "eur", "GBP": "gbp", "JPY": "jpy"}
SCALES = {"тыс.": (("тысяча", "тысячи", "тысяч"), "f"), "млн": (("миллион", "миллиона", "миллионов"), "m"),
          "млрд": (("миллиард", "миллиарда", "миллиардов"), "m"),
          "трлн": (("триллион", "триллиона", "триллионов"), "m")}
PERCENT = (("процент", "процента", "процентов"), "m")
HOURS = (("час", "часа", "часов"), "m")

# unit symbol -> (noun forms, gender, words after the noun); an adjective before the noun
# (квадратный метр) needs a fourth form, the genitive singular (two квадратных метра, but
# 2,5 квадратного метра)
_KM = ("километр", "километра", "километров")
_M = ("метр", "метра", "метров")
_DEG = ("градус", "градуса", "градусов")
UNITS = {
    "км/ч": (_KM, "m", " в час"), "м/с": (_M, "m", " в секунду"),
    "км²": (("квадратный километр", "квадратных километра", "квадратных километров", "квадратного километра"),
            "m", ""),
    "см²": (("квадратный сантиметр", "квадратных сантиметра", "квадратных сантиметров", "квадратного сантиметра"),
            "m", ""),
    "м²": (("квадратный метр", "квадратных метра", "квадратных метров", "квадратного метра"), "m", ""),
    "см³": (("кубический сантиметр", "кубических сантиметра", "кубических сантиметров", "кубического сантиметра"),
            "m", ""),
    "м³": (("кубический метр", "кубических метра", "кубических метров", "кубического метра"), "m", ""),
    "км": (_KM, "m", ""), "см": (("сантиметр", "сантиметра", "сантиметров"), "m", ""),
    "мм": (("миллиметр", "миллиметра", "миллиметров"), "m", ""), "м": (_M, "m", ""),
    "кг": (("килограмм", "килограмма", "килограммов"), "m", ""),
    "мг": (("миллиграмм", "миллиграмма", "миллиграммов"), "m", ""),
    "г": (("грамм", "грамма", "граммов"), "m", ""), "т": (("тонна", "тонны", "тонн"), "f", ""),
    "мл": (("миллилитр", "миллилитра", "миллилитров"), "m", ""), "л": (("литр", "литра", "литров"), "m", ""),
    "ч": (HOURS[0], "m", ""), "мин": (("минута", "минуты", "минут"), "f", ""),
    "сек": (("секунда", "секунды", "секунд"), "f", ""),
    "°C": (_DEG, "m", " Цельсия"), "°С": (_DEG, "m", " Цельсия"), "°F": (_DEG, "m", " Фаренгейта"),
    "°": (_DEG, "m", ""),
    "ГБ": (("гигабайт", "гигабайта", "гигабайт"), "m", ""), "Гб": (("гигабайт", "гигабайта", "гигабайт"), "m", ""),
    "МБ": (("мегабайт", "мегабайта", "мегабайт"), "m", ""), "Мб": (("мегабайт", "мегабайта", "мегабайт"), "m", ""),
    "ТБ": (("терабайт", "терабайта", "терабайт"), "m", ""),
    "кВт·ч": (("киловатт-час", "киловатт-часа", "киловатт-часов"), "m", ""),
    "кВт": (("киловатт", "киловатта", "киловатт"), "m", ""), "Вт": (("ватт", "ватта", "ватт"), "m", ""),
    "ГГц": (("гигагерц", "гигагерца", "гигагерц"), "m", ""), "МГц": (("мегагерц", "мегагерца", "мегагерц"), "m", ""),
    "Гц": (("герц", "герца", "герц"), "m", ""),
}

# ordinal ending -> (gender or "pl", case); "м" is decided by the word before
ORDINAL_ENDINGS = {
    "й": ("m", "n"), "ый": ("m", "n"), "ой": ("m", "n"), "ий": ("m", "n"), "я": ("f", "n"), "ая": ("f", "n"),
    "е": ("n", "n"), "ое": ("n", "n"), "ые": ("pl", "n"), "го": ("m", "g"), "ого": ("m", "g"), "му": ("m", "d"),
    "ому": ("m", "d"), "м": ("m", "?"), "ым": ("m", "i"), "ом": ("m", "p"), "х": ("pl", "g"), "ых": ("pl", "g"),
    "ю": ("f", "a"), "ую": ("f", "a"), "ми": ("pl", "i"),
}
# noun after a Roman numeral -> case of the ordinal (masculine)
ROMAN_BEFORE = {"век": "n", "века": "g", "веку": "d", "веком": "i", "веке": "p", "съезд": "n", "съезда": "g",
                "съезду": "d", "съездом": "i", "съезде": "p"}
# word before a Roman numeral (nominative) -> gender of the ordinal
ROMAN_AFTER = {"глава": "f", "часть": "f", "книга": "f", "серия": "f", "том": "m", "раздел": "m", "акт": "m",
               "сезон": "m", "выпуск": "m", "параграф": "m"}
YEAR_NOUNS = {"год": "n", "года": "g", "году": "?", "годом": "i", "годе": "p"}

ABBREV = {
    "т. е.": "то есть", "т.е.": "то есть", "т. д.": "так далее", "т.д.": "так далее",
    "т. п.": "тому подобное", "т.п.": "тому подобное", "т. к.": "так как", "т.к.": "так как",
    "т. н.": "так называемый", "т.н.": "так называемый", "т. ч.": "том числе", "т.ч.": "том числе",
    "др.": "другие", "проф.": "профессор", "акад.": "академик", "доц.": "доцент", "г-н": "господин",
    "г-жа": "госпожа", "д-р": "доктор", "ул.": "улица", "пр-т": "проспект", "просп.": "проспект",
    "пер.": "переулок", "пл.": "площадь", "им.": "имени", "напр.": "например", "рис.": "рисунок",
    "см.": "смотри", "табл.": "таблица", "тел.": "телефон",
}
# only before a number (д. 5, кв. 12, стр. 3, ок. 5) or a name (г. Москва)
ABBREV_BEFORE_NUMBER = {"д.": "дом", "кв.": "квартира", "стр.": "страница", "ок.": "около"}
# these may end a sentence: their dot is kept there
ABBREV_ENDS = {"т. д.", "т.д.", "т. п.", "т.п.", "др."}
ADDRESS_WORDS = {".": "точка", "/": "слэш", "@": "собака", "-": "дефис", "_": "нижнее подчёркивание",
                 ":": "двоеточие", "?": "вопросительный знак", "=": "равно", "&": "и", "+": "плюс",
                 "#": "решётка", "~": "тильда", "%": "процент"}
_DENOMINATORS = ["десят", "сот", "тысячн", "десятитысячн", "стотысячн", "миллионн"]


def _alt(keys) -> str:
    return "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))


def _n2w(n: int, to: str = "cardinal", **kw) -> str:
    return number_words()(n, lang="ru", to=to, **kw)


def cardinal(n: int, case: str = "n", gender: str = "m") -> str:
    """``n`` in words, in ``case`` (n, g) and ``gender`` (m, f, n); 1000-1999 as тысяча..."""
    return re.sub(r"^одн\w+ (?=тысяч)", "", _n2w(n, case=case, gender=gender))


def ordinal(n: int, case: str = "n", gender: str = "m") -> str:
    """The ordinal of ``n`` (``gender`` m, f, n or pl) in ``case`` (n, g, d, a, i, p)."""
    if gender == "pl":
        return _n2w(n, "ordinal", case=case, plural=True, animate=False)
    return _n2w(n, "ordinal", case=case, gender=gender, animate=False)


def genitive_singular(forms: tuple) -> str:
    """The genitive singular of ``forms`` (рубля; квадратного метра where a fourth form is given)."""
    return forms[3] if len(forms) > 3 else forms[1]


def noun_form(n: int, forms: tuple, case: str = "n") -> str:
    """The form of a noun counted by the integer ``n``: 1 рубль, 2 рубля, 5 рублей (nominative),
    1 рубля / 5 рублей (genitive)."""
    one, few, many = forms[:3]
    if case == "g":
        return genitive_singular(forms) if n % 10 == 1 and n % 100 != 11 else many
    if 11 <= n % 100 <= 14:
        return many
    return one if n % 10 == 1 else few if 2 <= n % 10 <= 4 else many


def decimal(whole: int, frac: str, case: str = "n") -> str:
    """``whole``,``frac``: три целых четырнадцать сотых (nominative), трёх целых... (genitive)."""
    if not 1 <= len(frac) <= len(_DENOMINATORS):
        raise ValueError(frac)
    f = int(frac)
    one_whole = whole % 10 == 1 and whole % 100 != 11
    head = f"{cardinal(whole, case, 'f')} {('целой' if case == 'g' else 'целая') if one_whole else 'целых'}"
    stem = _DENOMINATORS[len(frac) - 1]
    one_frac = f % 10 == 1 and f % 100 != 11
    tail = stem + (("ой" if case == "g" else "ая") if one_frac else "ых")
    return f"{head} {cardinal(f, case, 'f')} {tail}"


def digits(s: str) -> str:
    return " ".join(DIGITS[int(c)] for c in s if c.isdigit())


class RussianRules(Rules):
    """The Russian rules (see the module docstring)."""

    def __init__(self, lang: str = "ru", skip: frozenset = frozenset()):
        super().__init__(lang, skip)
        sep = r"[ \u00a0\u202f]"
        n = rf"(?:\d{{1,3}}(?:{sep}\d{{3}})+(?:,\d+)?|\d+(?:,\d+)?)"
        months = "|".join(MONTHS_GEN)
        scales = _alt(SCALES)
        end = r"(?![\w]|[.,]\d)"
        # money may be written with a decimal point and cents: $3.50 (три доллара пятьдесят центов)
        nm = rf"(?:\d+\.\d{{2}}(?!\d|[.,]\d)|{n})"
        # a dot after a unit (5 мин. и) is the abbreviation's: read with it unless it ends the sentence
        unit_dot = r"(\.(?![\w.]))?"
        parts = [
            ("url", r"\b(?:https?://|www\.)[^\s<>\"]*[^\s<>\".,;:!?)\]]", self.url),
            ("email", r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b", self.email),
            ("iso", r"(?<![\w.,/-])(\d{4})-(\d{1,2})-(\d{1,2})(?![\w/-]|[.,]\d)", self.iso_date),
            ("date", r"(?<![\w.,/-])(\d{1,2})([./])(\d{1,2})([./])(\d{4})(?: ?(г\.|года)(?!\w))?"
                     r"(?![\w/]|[.,]\d)", self.date),
            ("mdate", rf"(?<![\w.,])(\d{{1,2}}) ({months})(?: (\d{{4}})(?: ?(г\.|года)(?!\w))?)?(?!\w)",
             self.month_date),
            ("phone", r"(?<![\w.,+-])(?:\+\d{1,3}|\(\d{2,5}\)|\d{1,5})(?:[ -](?:\(\d{2,5}\)|\d{1,5})){2,5}"
                      r"(?![\w-]|[.,]\d)", self.phone),
            ("time", r"(?<![\w:.,])(\d{1,2}):(\d{2})(?![\w:]|[.,]\d)", self.time),
            ("money", rf"(?<![\w.,])(-|\u2212)?({_alt(SIGNS_BEFORE)}) ?({nm})(?: ?({scales})(?!\w))?{end}"
                      rf"|(?<![\w.,])(-|\u2212)?({nm})(?: ?({scales})(?!\w))? ?({_alt(SIGNS_AFTER)})(?!\w)",
             self.money),
            ("percent", rf"(?<![\w.,])(-|\u2212|\+)?({n}) ?%", self.percent),
            ("year", r"(?<![\w.,])(\d{1,4}) ?(годом|годе|году|года|год|г\.)(?!\w)", self.year),
            ("unit", rf"(?<![\w.,])(-|\u2212|\+)?({n}) ?({_alt(UNITS)})(?![\w/])(?!\.\s?[а-яё]\.){unit_dot}",
             self.unit),
            ("scale", rf"(?<![\w.,])({n}) ?({scales})(?!\w)", self.scale),
            ("ordinal", rf"(?<![\w.,])(\d{{1,6}})-({_alt(ORDINAL_ENDINGS)})(?![\w-])", self.ordinal),
            ("fraction", r"(?<![\w.,/])(\d{1,3})/(\d{1,3})(?![\w/]|[.,]\d)", self.fraction),
            ("range", rf"(?<![\w.,-])({n}) ?[-\u2013] ?({n})(?: ?({_alt(UNITS)})(?![\w/])(?!\.\s?[а-яё]\.){unit_dot}"
                      rf"| ?(%)| ?({_alt(SIGNS_AFTER)})(?!\w)|{end})", self.range),
            ("version", r"(?<![\w.,])v?\d+(?:\.\d+){2,}(?![\w.,]*\d)", self.version),
            ("roman", r"\b([IVXLC]+)\b(?!\.\w)", self.roman),
            ("numabbr", r"№ ?(?=\d)", lambda s, g, m: "номер "),
            ("abbr", rf"(?<![\w.])(?i:{_alt(ABBREV)})(?!\w)"
                     rf"|(?<![\w.])(?i:{_alt(ABBREV_BEFORE_NUMBER)})(?= ?\d)|(?<![\w.])г\.(?= [А-ЯЁ])",
             self.abbr),
            ("number", rf"(?<![\w.,])(-|\u2212|\+)?({n}){end}", self.number),
        ]
        self._compile(parts)

    def may_change(self, text: str) -> bool:
        return any(c.isdigit() or c in "@$€£¥₽%°./№-" for c in text) \
            or re.search(r"\b[IVXLC]+\b", text) is not None

    # --------------------------------------------------------------- context
    def _case(self, m: re.Match) -> str:
        """``g`` after a word that asks for the genitive (с only in "с ... до"), else ``n``."""
        p = self._prev_word(m).lower()
        if p in GENITIVE_CUES:
            return "g"
        if p in ("с", "со") and re.match(r"[^.!?]{0,40}?(?<!\w)до(?!\w)", self._next_text(m)):
            return "g"
        return "n"

    def _next_word(self, m: re.Match) -> str:
        """The next word when it may be the counted noun (not a preposition or conjunction)."""
        w = re.match(r"\s+([а-яёА-ЯЁ]+)", self._next_text(m))
        word = w.group(1).lower() if w else ""
        return "" if len(word) < 3 or word in FUNCTION_WORDS else word

    @staticmethod
    def _agree(n: int, word: str, case: str) -> tuple[str, str]:
        """(gender, case) of the cardinal ``n`` before ``word`` (see the module docstring)."""
        if 11 <= n % 100 <= 14 or n % 10 not in (1, 2) or not word:
            return "m", case
        if n % 10 == 1:
            if case == "g":
                return ("f" if word.endswith(("ы", "и")) else "m"), case
            if word.endswith(("а", "я")):
                return "f", case
            if word.endswith(("о", "е", "ё")):
                return "n", case
            if word.endswith(("у", "ю")):
                return "f", "a"
            return "m", case
        # after 2: a feminine noun in -ы/-и, or an adjective in -ые/-ие (две новые книги; a
        # masculine or neuter noun takes -ых: два новых стола)
        return ("f" if case == "n" and word.endswith(("ы", "и", "ые", "ие")) else "m"), case

    def _sentence_end(self, m: re.Match) -> bool:
        nxt = self._next_text(m)
        return not nxt.strip() or re.match(r"\s+[A-ZА-ЯЁ]", nxt) is not None

    def _keep_dot(self, written: str, m: re.Match) -> str:
        """The dot an abbreviation took from the sentence, when the sentence ends there."""
        return "." if written.endswith(".") and self._sentence_end(m) else ""

    @staticmethod
    def _int(s: str) -> int:
        return int(re.sub(r"[ \u00a0\u202f]", "", s))

    def _count(self, amount: str, forms: tuple, gender: str, case: str) -> str:
        """An amount and the noun it counts: две целых пять десятых килограмма, три рубля."""
        if self._too_long(amount):
            raise ValueError(amount)
        if "," in amount:
            whole, frac = amount.split(",", 1)
            return f"{decimal(self._int(whole), frac, case)} {genitive_singular(forms)}"
        n = self._int(amount)
        if len(amount) > 1 and amount[0] == "0":
            raise ValueError(amount)
        return f"{cardinal(n, case, gender)} {noun_form(n, forms, case)}"

    # --------------------------------------------------------------- rules
    def url(self, s, g, m):
        return self._spell(re.sub(r"^https?://", "", s))

    def email(self, s, g, m):
        return self._spell(s)

    def _spell(self, s: str) -> str:
        out = []
        for tok in re.findall(r"[^\W\d_]+|\d+|\S", s):
            if tok.isdigit():
                out.append(digits(tok) if len(tok) > 4 or tok[0] == "0" else cardinal(int(tok)))
            else:
                out.append(ADDRESS_WORDS.get(tok, tok))
        return " ".join(out)

    def _date_case(self, m: re.Match) -> str:
        if m.string[:m.start()].rstrip().endswith((":", "—", "–", "-")):
            return "n"
        p = self._prev_word(m).lower()
        if p in DATE_NOMINATIVE:
            return "n"
        if p in ("к", "ко"):
            return "d"
        if p in ("перед", "между"):
            return "i"
        return "g"

    def _date(self, d: int, mo: int, y: int | None, m: re.Match, suffix: str | None) -> str | None:
        if not valid_date(d, mo, y):
            return None
        out = f"{ordinal(d, self._date_case(m), 'n')} {MONTHS_GEN[mo - 1]}"
        if y is not None:
            out += f" {ordinal(y, 'g')} года" + (self._keep_dot(suffix, m) if suffix else "")
        return out

    def iso_date(self, s, g, m):
        return self._date(int(g[2]), int(g[1]), int(g[0]), m, None)

    def date(self, s, g, m):
        if g[1] != g[3]:
            return None
        return self._date(int(g[0]), int(g[2]), int(g[4]), m, g[5])

    def month_date(self, s, g, m):
        return self._date(int(g[0]), MONTHS_GEN.index(g[1]) + 1, int(g[2]) if g[2] else None, m, g[3])

    def phone(self, s, g, m):
        groups = re.findall(r"\+?\d+", s)
        total = sum(len(x.lstrip("+")) for x in groups)
        thousands = re.fullmatch(r"\d{1,3}(?: \d{3})+", s) is not None
        if thousands or not 7 <= total <= 15 or not (s.startswith("+") or "(" in s or "-" in s
                                                     or groups[0].startswith("0")):
            return self._fallback("phone", s, m)
        out = []
        for grp in groups:
            plus = grp.startswith("+")
            x = grp.lstrip("+")
            word = digits(x) if len(x) > 3 or (len(x) > 1 and x[0] == "0") else cardinal(int(x))
            out.append(("плюс " if plus else "") + word)
        return ", ".join(out)

    def time(self, s, g, m):
        h, mi = int(g[0]), int(g[1])
        if h > 24 or mi > 59:
            return None
        case = self._case(m)
        if mi == 0:
            return f"{cardinal(h, case)} {noun_form(h, HOURS[0], case)}"
        mins = f"ноль {cardinal(mi, 'n', 'f')}" if mi < 10 else cardinal(mi, case, "f")
        return f"{cardinal(h, case)} {mins}"

    def money(self, s, g, m):
        if g[1] is not None:
            neg, sign, amount, scale = g[0], g[1], g[2], g[3]
            cur = SIGNS_BEFORE[sign]
        else:
            neg, amount, scale, sign = g[4], g[5], g[6], g[7]
            cur = SIGNS_AFTER[sign]
        if re.fullmatch(r"\d+\.\d{2}", amount):
            amount = amount.replace(".", ",")
        case = self._case(m)
        minus = "минус " if neg else ""
        forms, gender = CURRENCIES[cur]
        dot = self._keep_dot(sign, m) if g[1] is None else ""
        if scale:
            sforms, sgender = SCALES[scale]
            return f"{minus}{self._count(amount, sforms, sgender, case)} {forms[2]}{dot}"
        whole, frac = amount.split(",", 1) if "," in amount else (amount, "")
        sub = SUBUNITS.get(CENTS.get(cur, ""))
        if frac and (len(frac) != 2 or sub is None):
            return f"{minus}{self._count(amount, forms, gender, case)}{dot}"
        out = self._count(whole, forms, gender, case)
        if frac and int(frac):
            cents = self._count(frac.lstrip("0") or "0", sub[0], sub[1], case)
            out = cents if self._int(whole) == 0 else f"{out} {cents}"
        return minus + out + dot

    def percent(self, s, g, m):
        sign = {"-": "минус ", "\u2212": "минус ", "+": "плюс "}.get(g[0] or "", "")
        return sign + self._count(g[1], PERCENT[0], PERCENT[1], self._case(m))

    def year(self, s, g, m):
        num, noun = g
        n = int(num)
        p = self._prev_word(m).lower()
        if noun == "г.":
            if len(num) < 3 or (len(num) == 3 and p not in GENITIVE_CUES | PREPOSITIONAL | {"с", "к"}):
                return self._fallback("year", s, m)
            if p in PREPOSITIONAL - {"на"}:
                case, word = "p", "году"
            elif p in ("к", "ко"):
                case, word = "d", "году"
            elif p in ("за", "на", "через", "про"):
                case, word = "n", "год"
            else:
                case, word = "g", "года"
            return f"{ordinal(n, case)} {word}{self._keep_dot(noun, m)}"
        if len(num) < 3 or (len(num) == 3 and noun in ("год", "года")):
            return self._fallback("year", s, m)  # a duration: два года
        case = YEAR_NOUNS[noun]
        if case == "?":
            case = "p" if p in PREPOSITIONAL else "d"
        return f"{ordinal(n, case)} {noun}"

    def unit(self, s, g, m):
        neg, amount, u, dot = g
        forms, gender, after = UNITS[u]
        minus = ("плюс " if neg == "+" else "минус ") if neg else ""
        end = "." if dot and self._sentence_end(m) else ""
        return f"{minus}{self._count(amount, forms, gender, self._case(m))}{after}{end}"

    def scale(self, s, g, m):
        amount, sc = g
        forms, gender = SCALES[sc]
        return self._count(amount, forms, gender, self._case(m)) + self._keep_dot(sc, m)

    def ordinal(self, s, g, m):
        num, ending = g
        if self._too_long(num):
            return None
        n = int(num)
        gender, case = ORDINAL_ENDINGS[ending]
        if case == "?":
            case = "p" if self._prev_word(m).lower() in PREPOSITIONAL else "i"
        if ending == "е" and ((len(num) == 4 and n % 10 == 0) or self._next_word(m) in ("годы", "гг")):
            gender = "pl"
        return ordinal(n, case, gender)

    def fraction(self, s, g, m):
        a, b = int(g[0]), int(g[1])
        if (a, b) == (24, 7):
            return "двадцать четыре на семь"  # круглосуточно: not a fraction
        if a == 0 or b < 2:
            return None
        case = self._case(m)
        if a % 10 == 1 and a % 100 != 11:
            return f"{cardinal(a, case, 'f')} {ordinal(b, case, 'f')}"
        return f"{cardinal(a, case, 'f')} {ordinal(b, 'g', 'pl')}"

    def range(self, s, g, m):
        a, b, unit, dot, pct, sign = g
        if self._too_long(a) or self._too_long(b):
            return None
        case = self._case(m)
        noun = after = ""
        if unit or pct or sign:  # 10-20 км: десять-двадцать километров
            forms, gender, after = UNITS[unit] if unit else (*PERCENT, "") if pct \
                else (*CURRENCIES[SIGNS_AFTER[sign]], self._keep_dot(sign, m))
            noun = " " + (genitive_singular(forms) if "," in b else noun_form(self._int(b), forms, case))
            if dot and self._sentence_end(m):
                after += "."
        elif "," in b:
            gender = "f"
        else:
            gender, case = self._agree(self._int(b), self._next_word(m), case)

        def side(x: str) -> str:
            if "," in x:
                whole, frac = x.split(",", 1)
                return decimal(self._int(whole), frac, case)
            if len(x) > 1 and x[0] == "0":
                return digits(x)
            return cardinal(self._int(x), case, gender)

        return f"{side(a)}-{side(b)}{noun}{after}"

    def version(self, s, g, m):
        v = s.startswith("v")
        parts = s.lstrip("v").split(".")
        if any(self._too_long(p) for p in parts):
            return None
        words = " точка ".join(digits(p) if len(p) > 1 and p[0] == "0" else cardinal(int(p)) for p in parts)
        return ("версия " if v else "") + words

    def roman(self, s, g, m):
        v = roman_value(g[0])
        if v is None:
            return None
        nxt = re.match(r"\s+([а-яё]+)", self._next_text(m))
        if nxt and nxt.group(1) in ROMAN_BEFORE:
            return ordinal(v, ROMAN_BEFORE[nxt.group(1)])
        p = self._prev_word(m)
        if p.lower() in ROMAN_AFTER:
            return ordinal(v, "n", ROMAN_AFTER[p.lower()])
        if re.fullmatch(r"[А-ЯЁ][а-яё]*[бвгджзклмнпрстфхцчшщйь]", p) and not p.endswith(("ом", "ем", "ём", "ым", "им")):
            w = ordinal(v)
            return w[0].upper() + w[1:]
        return None

    def abbr(self, s, g, m):
        if s == "г.":
            word = "город"
        else:
            key = s.lower() if s.lower() in ABBREV or s.lower() in ABBREV_BEFORE_NUMBER else s
            word = ABBREV.get(key) or ABBREV_BEFORE_NUMBER[key]
        if s[0].isupper():
            word = word[0].upper() + word[1:]
        if s.lower() in ABBREV_ENDS and self._sentence_end(m):
            return word + "."
        if s.endswith(".") and not self._next_text(m).strip():
            return word + "."
        return word

    def number(self, s, g, m):
        neg, num = g
        if self._too_long(num):
            return None
        if neg:
            before = m.string[:m.start()]
            if before and not before[-1].isspace() and before[-1] not in "([{\"'«":
                return None
        minus = ("плюс " if neg == "+" else "минус ") if neg else ""
        case = self._case(m)
        if "," in num:
            whole, frac = num.split(",", 1)
            return minus + decimal(self._int(whole), frac, case)
        if len(num) > 1 and num[0] == "0":
            return minus + digits(num)
        n = self._int(num)
        gender, case = self._agree(n, self._next_word(m), case)
        return minus + cardinal(n, case, gender)


__all__ = ["RussianRules", "cardinal", "decimal", "noun_form", "ordinal"]
