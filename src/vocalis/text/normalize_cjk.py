"""Japanese (``ja``) and Korean (``ko``) text normalization: the rules
:func:`vocalis.text.normalize.normalize` runs for them.

Both write without spaces between a number and its counter (2026年, 3개), so the rules look
at digits and signs, not at word boundaries, and keep every character they do not read as
it is (spacing included). Number words come from ``num2words`` 0.5.14 (``lang="ja"``: kanji
numerals; ``lang="ko"``: Sino-Korean numerals); the native Korean numerals (하나, 둘...),
digits read one by one and the patterns are written here. Chinese is not covered
(num2words 0.5.14 has no Chinese converter).

Japanese (conventions of Japanese text-to-speech front ends and of 文化庁「公用文作成の要領」
for kanji numerals):

* Quantities as kanji numerals with their counter as written: 3個 三個, 1,000人 千人 (no 一
  before 十, 百, 千; 一万), 12,345,678 千二百三十四万五千六百七十八; decimals 3.14 三点一四.
* Digits one by one (phone numbers, a leading zero, postal codes) as kanji digits with 〇,
  groups joined by の, as they are read: 03-1234-5678 〇三の一二三四の五六七八; 〒 郵便番号.
* Dates 2026-03-15, 2026/4/1 as 年月日; 2026年5月12日 keeps its counters; 3/4 is a fraction
  (四分の三) unless a weekday in brackets follows: 3/4(金) 三月四日(金).
* Times 14:30 十四時三十分, 9:00 九時.
* Money: a sign becomes its word after the amount (¥/￥ 円, $ ドル, € ユーロ, £ ポンド,
  ₩ ウォン); $3.50 三ドル五十セント.
* Percent パーセント; temperature ℃/°C 度 (-5℃ マイナス五度), °F 華氏...度; units in katakana
  (km キロメートル, kg キログラム, ml ミリリットル, GB ギガバイト..., m² 平方メートル, m³ 立方メートル),
  60km/h 時速六十キロメートル (時速60km/h too: 時速 is not said twice).
* Ranges 10〜20 十から二十 (10〜20kg 十から二十キログラム); negative numbers マイナス.
* A number written against Latin letters (3D, 5G, iPhone15) is a name: left as written.
* Abbreviations ㈱/(株) 株式会社, ㈲/(有) 有限会社, ㈶/(財) 財団法人, ㈳/(社) 社団法人; Roman
  numeral characters Ⅰ-Ⅻ as kanji numerals (第Ⅱ章 第二章).

Korean (한글 맞춤법 제43-44항 for numbers and units, 국립국어원 표준 발음 for native numerals):

* Sino-Korean numerals (천, 만: no 일 before 십, 백, 천, 만), grouped by 만 with a space as
  제44항 asks: 12,345,678 천이백삼십사만 오천육백칠십팔; decimals 3.14 삼 점 일사.
* Native numerals before counters of things, people, age, cups, hours and order up to 99
  (3개 세개, 25명 스물다섯명, 20살 스무살, 1번째 첫번째, 3시 세시); from 100 Sino-Korean.
  Other counters (년, 월, 일, 분, 원, 층, 회...) take Sino-Korean numerals; 6월 유월, 10월 시월.
* Spacing as written (3개 세개; 제43항 allows numbers and units together); a word that
  replaces a sign gets a space (₩5,000 오천 원, 50% 오십 퍼센트, 5km 오 킬로미터).
* Digits one by one with 공 for zero (010-1234-5678 공일공, 일이삼사, 오육칠팔).
* Dates 2026-03-15, 2026.4.1. as 년 월 일; 3/4 사분의 삼 unless a weekday follows: 3/4(금)
  삼월 사일(금). Times 14:30 열네 시 삼십 분 (hours in native numerals).
* Money: ₩ 원, $ 달러, € 유로, £ 파운드, ¥ 엔 after the amount; $3.50 삼 달러 오십 센트.
* Percent 퍼센트; temperatures below zero 영하 (-5°C 영하 오 도), other negatives 마이너스.
  Units 5km 오 킬로미터, 80m² 팔십 제곱미터; 60km/h 시속 육십 킬로미터 (시속 60km/h too).
* Ranges 10~20 십에서 이십; before a native counter both sides are counted (10~20명 열 명에서
  스무 명). A number written against Latin letters (3D, 5G) is a name: left as written.
* Abbreviations ㈜/(주) 주식회사, (유) 유한회사, (사) 사단법인, (재) 재단법인; Roman numeral
  characters Ⅰ-Ⅻ as Sino-Korean numerals (제Ⅱ장 제이장).
"""

from __future__ import annotations

import re

from vocalis.text.rules import Rules, number_words, roman_value, valid_date

DIGITS = {"ja": "〇一二三四五六七八九", "ko": "공일이삼사오육칠팔구"}
POINT = {"ja": "点", "ko": " 점 "}
MINUS = {"ja": "マイナス", "ko": "마이너스 "}
PLUS = {"ja": "プラス", "ko": "플러스 "}
PERCENT = {"ja": "パーセント", "ko": "퍼센트"}
RANGE = {"ja": "から", "ko": "에서 "}
GROUP_SEP = {"ja": "の", "ko": ", "}  # between groups of a phone number
# sign -> (word, cent word)
MONEY = {
    "ja": {"$": ("ドル", "セント"), "€": ("ユーロ", "セント"), "£": ("ポンド", "ペンス"), "¥": ("円", ""),
           "₩": ("ウォン", ""), "USD": ("ドル", "セント"), "EUR": ("ユーロ", "セント"), "GBP": ("ポンド", "ペンス"),
           "JPY": ("円", ""), "KRW": ("ウォン", ""), "ドル": ("ドル", "セント"), "ユーロ": ("ユーロ", "セント")},
    "ko": {"$": ("달러", "센트"), "€": ("유로", "센트"), "£": ("파운드", "펜스"), "¥": ("엔", ""), "₩": ("원", ""),
           "USD": ("달러", "센트"), "EUR": ("유로", "센트"), "GBP": ("파운드", "펜스"), "JPY": ("엔", ""),
           "KRW": ("원", ""), "달러": ("달러", "센트"), "유로": ("유로", "센트")},
}
FULLWIDTH_SIGNS = {"＄": "$", "￥": "¥", "￡": "£", "￦": "₩"}
SCALES = "万|億|兆|만|억|조"
# unit -> (prefix, word): ja prefix+number+word, ko prefix+number+" "+word
UNITS = {
    "ja": {"km/h": ("時速", "キロメートル"), "m/s": ("秒速", "メートル"), "km²": ("", "平方キロメートル"),
           "cm²": ("", "平方センチメートル"), "m²": ("", "平方メートル"), "cm³": ("", "立方センチメートル"),
           "m³": ("", "立方メートル"), "km": ("", "キロメートル"),
           "cm": ("", "センチメートル"), "mm": ("", "ミリメートル"), "m": ("", "メートル"), "kg": ("", "キログラム"),
           "mg": ("", "ミリグラム"), "g": ("", "グラム"), "ml": ("", "ミリリットル"), "mL": ("", "ミリリットル"),
           "L": ("", "リットル"), "℃": ("", "度"), "°C": ("", "度"), "°F": ("華氏", "度"), "°": ("", "度"),
           "GB": ("", "ギガバイト"), "MB": ("", "メガバイト"), "TB": ("", "テラバイト"), "KB": ("", "キロバイト"),
           "kB": ("", "キロバイト"), "GHz": ("", "ギガヘルツ"), "MHz": ("", "メガヘルツ"), "Hz": ("", "ヘルツ"),
           "kWh": ("", "キロワット時"), "kW": ("", "キロワット"), "W": ("", "ワット")},
    "ko": {"km/h": ("시속 ", "킬로미터"), "m/s": ("초속 ", "미터"), "km²": ("", "제곱킬로미터"),
           "cm²": ("", "제곱센티미터"), "m²": ("", "제곱미터"), "cm³": ("", "세제곱센티미터"), "m³": ("", "세제곱미터"),
           "km": ("", "킬로미터"), "cm": ("", "센티미터"),
           "mm": ("", "밀리미터"), "m": ("", "미터"), "kg": ("", "킬로그램"), "mg": ("", "밀리그램"), "g": ("", "그램"),
           "ml": ("", "밀리리터"), "mL": ("", "밀리리터"), "L": ("", "리터"), "℃": ("", "도"), "°C": ("", "도"),
           "°F": ("화씨 ", "도"), "°": ("", "도"), "GB": ("", "기가바이트"), "MB": ("", "메가바이트"),
           "TB": ("", "테라바이트"), "KB": ("", "킬로바이트"), "kB": ("", "킬로바이트"), "GHz": ("", "기가헤르츠"),
           "MHz": ("", "메가헤르츠"), "Hz": ("", "헤르츠"), "kWh": ("", "킬로와트시"), "kW": ("", "킬로와트"),
           "W": ("", "와트")},
}
TEMPERATURE = {"℃", "°C", "°F", "°"}
ABBREV = {
    "ja": {"㈱": "株式会社", "(株)": "株式会社", "（株）": "株式会社", "㈲": "有限会社", "(有)": "有限会社",
           "（有）": "有限会社", "㈶": "財団法人", "(財)": "財団法人", "（財）": "財団法人", "㈳": "社団法人",
           "(社)": "社団法人", "（社）": "社団法人"},
    "ko": {"㈜": "주식회사", "(주)": "주식회사", "（주）": "주식회사", "(유)": "유한회사", "（유）": "유한회사",
           "(사)": "사단법인", "（사）": "사단법인", "(재)": "재단법인", "（재）": "재단법인"},
}
WEEKDAY = {"ja": r"[（(][月火水木金土日](?:曜日?)?[）)]", "ko": r"[（(][월화수목금토일](?:요일)?[）)]"}
ADDRESS_WORDS = {
    "ja": {".": "ドット", "/": "スラッシュ", "@": "アット", "-": "ハイフン", "_": "アンダーバー", ":": "コロン",
           "?": "クエスチョン", "=": "イコール", "&": "アンド", "+": "プラス", "#": "シャープ", "~": "チルダ",
           "%": "パーセント"},
    "ko": {".": "점", "/": "슬래시", "@": "골뱅이", "-": "하이픈", "_": "언더바", ":": "콜론", "?": "물음표",
           "=": "등호", "&": "앤드", "+": "플러스", "#": "샵", "~": "물결", "%": "퍼센트"},
}
# Korean counters read with native numerals (1-99); 개월 and 달러 are not among them
KO_NATIVE_COUNTERS = r"시간|번째|마리|사람|가지|개(?!월)|명|살|잔|시|달(?!러)"
KO_NATIVE_UNITS = ["", "한", "두", "세", "네", "다섯", "여섯", "일곱", "여덟", "아홉"]
KO_NATIVE_TENS = ["", "열", "스물", "서른", "마흔", "쉰", "예순", "일흔", "여든", "아흔"]
KO_MONTHS = ["일월", "이월", "삼월", "사월", "오월", "유월", "칠월", "팔월", "구월", "시월", "십일월", "십이월"]
_ROMAN_CHARS = {**{chr(0x2160 + i): r for i, r in enumerate(
    ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII", "L", "C", "D", "M"])},
    **{chr(0x2170 + i): r for i, r in enumerate(
        ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII", "L", "C", "D", "M"])}}
_MAY_CHANGE = set("@$€£¥₩%％＄￥￡￦℃°〒()（）") | set(_ROMAN_CHARS) | {c for t in ABBREV.values() for c in t if len(c) == 1}


def _alt(keys) -> str:
    return "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))


def ko_native(n: int) -> str:
    """The native Korean numeral 1-99 before a counter: 한, 두, 세, 네, 스무 (20), 스물한..."""
    if not 1 <= n <= 99:
        raise ValueError(n)
    if n == 20:
        return "스무"
    tens, units = divmod(n, 10)
    return KO_NATIVE_TENS[tens] + KO_NATIVE_UNITS[units]


class CjkRules(Rules):
    """The Japanese or Korean rules (see the module docstring)."""

    def __init__(self, lang: str, skip: frozenset = frozenset()):
        super().__init__(lang, skip)
        L = lang
        n = r"(?:\d{1,3}(?:[,，]\d{3})+|\d+)(?:[.．]\d+)?"
        start = r"(?<![A-Za-z\d.,．，])"
        end = r"(?!\d|[.,．，]\d)"
        money = _alt([k for k in MONEY[L] if len(k) == 1] + list(FULLWIDTH_SIGNS))
        codes = _alt([k for k in MONEY[L] if len(k) > 1])
        parts = [
            ("url", r"(?<![A-Za-z0-9])(?:https?://|www\.)[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*"
                    r"[A-Za-z0-9/#=_-]", self.url),
            ("email", r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+", self.email),
            ("postal", r"〒\s?(\d{3})[-－](\d{4})(?!\d)", self.postal) if L == "ja" else None,
            ("iso", r"(?<![\d.,/-])(\d{4})([-/.])\s?(\d{1,2})([-/.])\s?(\d{1,2})(\.(?!\d))?(?![\d/-]|[.,]\d)",
             self.ymd),
            ("dmy", r"(?<![\d.,/-])\d{1,2}[./]\d{1,2}[./]\d{2,4}(?![\d/]|[.,]\d)", lambda s, g, m: None),
            ("phone", r"(?<![\dA-Za-z.,+-])(?:\+\d{1,3}[ -]?)?(?:\(\d{1,5}\)[ -]?)?\d{1,5}(?:[-－ ]\d{1,5}){1,4}"
                      r"(?![\dA-Za-z-]|[.,]\d)", self.phone),
            ("time", r"(?<![\d:：.,])(\d{1,2})[:：](\d{2})(?:[:：](\d{2}))?(?![\d:：]|[.,]\d)", self.time),
            ("money", rf"{start}([-\u2212])?({money})\s?({n})(?:\s?({SCALES}))?{end}"
                      rf"|{start}([-\u2212])?({n})\s?({codes})(?![A-Za-z])", self.money),
            ("percent", rf"{start}([-\u2212+])?({n})\s?[%％]", self.percent),
            ("unit", rf"{start}([-\u2212])?({n})\s?({_alt(UNITS[L])})(?![A-Za-z/])", self.unit),
            ("month", r"(?<![\dA-Za-z.,])(\d{1,2})(\s?)월", self.month) if L == "ko" else None,
            ("counter", rf"(?<![\dA-Za-z.,])(\d{{1,2}})(\s?)({KO_NATIVE_COUNTERS})", self.counter)
            if L == "ko" else None,
            ("fraction", r"(?<![\dA-Za-z.,/／])(\d{1,3})[/／](\d{1,3})(?![\d/／]|[.,]\d)", self.fraction),
            ("range", rf"{start}({n})\s?[~〜～\-–]\s?({n}){end}(?:\s?({_alt(UNITS[L])})(?![A-Za-z/])|\s?([%％]))?"
                      + (rf"(?:(\s?)({KO_NATIVE_COUNTERS}))?" if L == "ko" else "()()"), self.range),
            ("version", r"(?<![\dA-Za-z.,])v?\d+(?:\.\d+){2,}(?![\d.]|[.,]\d)", self.version),
            ("roman", rf"[{''.join(_ROMAN_CHARS)}]+", self.roman),
            ("abbr", _alt(ABBREV[L]), lambda s, g, m: ABBREV[self.lang][s]),
            ("number", rf"{start}([-\u2212])?({n}){end}(?![A-Za-z])", self.number),
        ]
        self._compile(parts)

    def may_change(self, text: str) -> bool:
        return any(c.isdigit() or c in _MAY_CHANGE for c in text) or "://" in text or "www." in text

    # --------------------------------------------------------------- words
    def card(self, n: int) -> str:
        return number_words()(n, lang=self.lang)

    def digits(self, s: str) -> str:
        return "".join(DIGITS[self.lang][int(c)] for c in s if c.isdigit())

    def num(self, s: str) -> str:
        """A written number (separators ``,``; decimal point ``.``, full-width too) in words."""
        if self._too_long(s):
            raise ValueError(s)
        s = s.replace("，", ",").replace("．", ".")
        whole, _, frac = s.partition(".")
        whole = whole.replace(",", "")
        head = self.digits(whole) if len(whole) > 1 and whole[0] == "0" else self.card(int(whole))
        if not frac:
            return head
        tail = self.digits(frac)
        if self.lang == "ko":  # 일 점 영오 reads best with 영 for a zero after the point
            tail = tail.replace("공", "영")
        return f"{head}{POINT[self.lang]}{tail}"

    def _spaced(self, words: str, noun: str) -> str:
        """A number and the word that replaced a sign: 五ドル (ja), 오 달러 (ko)."""
        return f"{words}{noun}" if self.lang == "ja" else f"{words} {noun}"

    def _minus_ok(self, m: re.Match) -> bool:
        """A minus sign is not a hyphen after a Latin letter or digit (COVID-19)."""
        before = m.string[:m.start()]
        return not before or not re.match(r"[A-Za-z\d]", before[-1])

    # --------------------------------------------------------------- rules
    def url(self, s, g, m):
        return self._spell(re.sub(r"^https?://", "", s))

    def email(self, s, g, m):
        return self._spell(s)

    def _spell(self, s: str) -> str:
        words = ADDRESS_WORDS[self.lang]
        out = []
        for tok in re.findall(r"[A-Za-z]+|\d+|\S", s):
            if tok.isdigit():
                out.append(self.digits(tok) if len(tok) > 4 or tok[0] == "0" else self.card(int(tok)))
            else:
                out.append(words.get(tok, tok))
        return " ".join(out)

    def postal(self, s, g, m):
        return f"郵便番号{self.digits(g[0])}の{self.digits(g[1])}"

    def ymd(self, s, g, m):
        y, sep, mo, sep2, d, dot = int(g[0]), g[1], int(g[2]), g[3], int(g[4]), g[5]
        if sep != sep2 or (dot and sep != ".") or not valid_date(d, mo, y):
            return None
        if self.lang == "ja":
            out = f"{self.card(y)}年{self.card(mo)}月{self.card(d)}日"
        else:
            out = f"{self.card(y)}년 {KO_MONTHS[mo - 1]} {self.card(d)}일"
        return out + ("." if dot and not self._next_text(m).strip() else "")

    def phone(self, s, g, m):
        groups = re.findall(r"\d+", s)
        total = sum(len(x) for x in groups)
        plus = s.startswith("+")
        if not 9 <= total <= 15 or not (plus or s.startswith("(") or groups[0].startswith("0")) \
                or not re.search(r"[-－]", s):
            return self._fallback("phone", s, m)
        L = self.lang
        out = GROUP_SEP[L].join(self.digits(x) for x in groups)
        return PLUS[L] + out if plus else out

    def time(self, s, g, m):
        h, mi, sec = int(g[0]), int(g[1]), g[2]
        if h > 24 or mi > 59 or (sec is not None and int(sec) > 59):
            return None
        if self.lang == "ja":
            out = f"{self.card(h)}時" + (f"{self.card(mi)}分" if mi else "")
            return out + (f"{self.card(int(sec))}秒" if sec and int(sec) else "")
        out = f"{ko_native(h) if h else self.card(0)} 시" + (f" {self.card(mi)} 분" if mi else "")
        return out + (f" {self.card(int(sec))} 초" if sec and int(sec) else "")

    def money(self, s, g, m):
        if g[1] is not None:
            neg, sign, amount, scale = g[0], FULLWIDTH_SIGNS.get(g[1], g[1]), g[2], g[3]
        else:
            neg, amount, sign, scale = g[4], g[5], g[6], None
        if neg and not self._minus_ok(m):
            return None
        word, cent = MONEY[self.lang][sign]
        minus = MINUS[self.lang] if neg else ""
        whole, _, frac = amount.replace("．", ".").partition(".")
        if frac and len(frac) == 2 and cent and not scale:
            out = self._spaced(self.num(whole), word)
            if int(frac):
                out += ("" if self.lang == "ja" else " ") + self._spaced(self.card(int(frac)), cent)
            return minus + out
        return minus + self._spaced(self.num(amount) + (scale or ""), word)

    def percent(self, s, g, m):
        sign = {"-": MINUS, "\u2212": MINUS, "+": PLUS}.get(g[0] or "")
        if sign and not self._minus_ok(m):
            return None
        return (sign[self.lang] if sign else "") + self._spaced(self.num(g[1]), PERCENT[self.lang])

    def _prefix(self, prefix: str, m: re.Match) -> str:
        """The unit's prefix (時速, 시속 ...) unless the text already has it before the number
        (時速60km/h: 時速六十キロメートル, not 時速時速)."""
        return "" if prefix and m.string[:m.start()].rstrip().endswith(prefix.strip()) else prefix

    def unit(self, s, g, m):
        neg, amount, u = g
        if neg and not self._minus_ok(m):
            return None
        prefix, word = UNITS[self.lang][u]
        prefix = self._prefix(prefix, m)
        minus = ""
        if neg:
            minus = "영하 " if self.lang == "ko" and u in TEMPERATURE else MINUS[self.lang]
        return prefix + self._spaced(minus + self.num(amount), word)

    def month(self, s, g, m):
        mo = int(g[0])  # spacing as written: 6월 유월, 6 월 유 월
        return f"{KO_MONTHS[mo - 1][:-1] if 1 <= mo <= 12 else self.card(mo)}{g[1]}월"

    def counter(self, s, g, m):
        n, space, c = int(g[0]), g[1], g[2]
        if len(g[0]) > 1 and g[0][0] == "0":
            return self._fallback("counter", s, m)
        if n == 0:
            return f"{self.card(0)}{space}{c}"
        return ("첫" if n == 1 and c == "번째" else ko_native(n)) + space + c

    def fraction(self, s, g, m):
        a, b = int(g[0]), int(g[1])
        if re.match(WEEKDAY[self.lang], self._next_text(m).lstrip()):
            if not valid_date(b, a, None):
                return None
            if self.lang == "ja":
                return f"{self.card(a)}月{self.card(b)}日"
            return f"{KO_MONTHS[a - 1]} {self.card(b)}일"
        if a == 0 or b < 2:
            return None
        if self.lang == "ja":
            return f"{self.card(b)}分の{self.card(a)}"
        return f"{self.card(b)}분의 {self.card(a)}"

    def range(self, s, g, m):
        a, b, unit, pct, space, counter = g
        L = self.lang
        if unit or pct:  # 10〜20kg 十から二十キログラム, 10~20% 십에서 이십 퍼센트
            prefix, word = UNITS[L][unit] if unit else ("", PERCENT[L])
            return self._prefix(prefix, m) + self._spaced(f"{self.num(a)}{RANGE[L]}{self.num(b)}", word)
        if L == "ko" and counter:
            if re.fullmatch(r"\d{1,2}", a) and re.fullmatch(r"\d{1,2}", b) and int(a) and int(b):
                left, right = ko_native(int(a)), ko_native(int(b))
                if counter == "번째":
                    left = "첫" if a == "1" else left
                    right = "첫" if b == "1" else right
            else:
                left, right = self.num(a), self.num(b)
            return f"{left} {counter}에서 {right} {counter}"
        return f"{self.num(a)}{RANGE[self.lang]}{self.num(b)}"

    def version(self, s, g, m):
        parts = s.lstrip("v").split(".")
        return POINT[self.lang].join(self.num(p) for p in parts)

    def roman(self, s, g, m):
        v = roman_value("".join(_ROMAN_CHARS[c] for c in s))
        return None if v is None else self.card(v)

    def number(self, s, g, m):
        neg, amount = g
        if neg and not self._minus_ok(m):
            return neg + self.num(amount)  # a hyphen: COVID-19
        return (MINUS[self.lang] if neg else "") + self.num(amount)


__all__ = ["CjkRules", "ko_native"]
