"""Word tables of the stated-size reader (:mod:`sjf_core.predict._stated`): units, number words,
qualifiers, closed answer forms and verbosity cues in English, German, French, Spanish, Russian
and Chinese. Data only; every entry is lower-case (the reader lower-cases its window).

Token sizes (issue 23; the labelling rules of ``tests/data/stated_sizes.jsonl`` are the same):

* :data:`TOKENS_PER_WORD`: Tekken tokens (Mistral NeMo's 131k multilingual tokenizer, from the
  ``mistral-common`` wheel) per whitespace word of the prompts of the public conversation data (docs/data.md)
  in that language (Chinese: per Han character, the unit of "500字"), measured by
  ``benchmarks/tokens_per_word.py``: en 1.27 (400 prompts), de 1.75 (14), fr 1.46 (15),
  es 1.57 (18), ru 2.36 (25), zh 1.11 (387). The data's own unit, len(text) / 4, gives
  1.48 / 1.67 / 1.57 / 1.51 / 1.59 / 0.32 per word: close for the Latin scripts, 3.5× lower
  for Chinese, where a backend's time follows its tokens.
* :data:`WORDS_PER_UNIT`: a sentence = 25 words, a paragraph = 100, a line = 10, a page = 500,
  a list item = 30, a name-like item (names, titles, tags, with its numbering) = 8 (Chinese: ×1.5
  characters). Sentences and items from the answers of prompts in that data that ask for
  them (median answer / stated with 20 and 15 words: 1.2–1.7 and 2.1); paragraphs (0.9 with
  100 words) and words (1.1) as stated.
"""

from __future__ import annotations

#: Tokens per word (Chinese: per character), see the module docstring.
TOKENS_PER_WORD = {"en": 1.27, "de": 1.75, "fr": 1.46, "es": 1.57, "ru": 2.36, "zh": 1.11}
#: Tokens per written character (for "N characters"): tokens per word / characters per word.
TOKENS_PER_CHAR = {"en": 0.215, "de": 0.26, "fr": 0.23, "es": 0.26, "ru": 0.37, "zh": 1.11}
#: Words per unit (canonical unit -> words; Chinese multiplies by :data:`ZH_CHARS_PER_WORD`).
WORDS_PER_UNIT = {"word": 1.0, "sentence": 25.0, "paragraph": 100.0, "line": 10.0, "page": 500.0,
                  "item": 30.0, "name": 8.0}
ZH_CHARS_PER_WORD = 1.5

#: Unit words -> (canonical unit, language). "character" and "token" are handled by the reader.
UNITS: dict[str, tuple[str, str]] = {}


def _add(lang: str, unit: str, words: str) -> None:
    for w in words.split():
        UNITS.setdefault(w, (unit, lang))


_add("en", "word", "word words")
_add("en", "sentence", "sentence sentences")
_add("en", "paragraph", "paragraph paragraphs")
_add("en", "line", "line lines")
_add("en", "page", "page pages")
_add("en", "character", "character characters chars")
_add("en", "token", "token tokens")
_add("en", "item", "bullet bullets points items ideas examples tips reasons ways steps suggestions options facts "
     "questions questions strategies benefits features")
_add("en", "name", "names titles headlines taglines slogans keywords tags hashtags nicknames")
_add("de", "word", "wort wörter worte wörtern worten")
_add("de", "sentence", "satz sätze sätzen satzes")
_add("de", "paragraph", "absatz absätze absätzen abschnitte abschnitten")
_add("de", "line", "zeile zeilen")
_add("de", "page", "seite seiten")
_add("de", "character", "zeichen buchstaben")
_add("de", "item", "stichpunkte stichpunkten punkte punkten aufzählungspunkte ideen beispiele beispielen tipps "
     "gründe schritte vorschläge fragen")
_add("de", "name", "namen titel überschriften schlagwörter")
_add("fr", "word", "mot mots")
_add("fr", "sentence", "phrase phrases")
_add("fr", "paragraph", "paragraphe paragraphes")
_add("fr", "line", "ligne lignes vers")  # "vers": lines of a poem ("un poème de 4 vers")
_add("fr", "page", "pages")
_add("fr", "character", "caractère caractères lettres")
_add("fr", "item", "points idées exemples conseils raisons étapes suggestions questions")
_add("fr", "name", "noms titres slogans")
_add("es", "word", "palabra palabras")
_add("es", "sentence", "frase frases oración oraciones")
_add("es", "paragraph", "párrafo párrafos parrafo parrafos")
_add("es", "line", "línea líneas linea lineas versos")
_add("es", "page", "página páginas pagina paginas")
_add("es", "character", "carácter caracteres letras")
_add("es", "item", "puntos ideas ejemplos consejos razones pasos sugerencias preguntas viñetas")
_add("es", "name", "nombres títulos titulos eslóganes")
_add("ru", "word", "слово слова слов словами словах словом")
_add("ru", "sentence", "предложение предложения предложений предложениях предложениями предложением")
_add("ru", "paragraph", "абзац абзаца абзацев абзацах абзацами абзацем")
_add("ru", "line", "строка строки строк строчек строчки строкой")
_add("ru", "page", "страница страницы страниц страницах")
_add("ru", "character", "символ символа символов знаков")
_add("ru", "token", "токен токена токенов")
_add("ru", "item", "пункт пункта пунктов идеи идей примера примеров совета советов причины причин шага шагов "
     "вопроса вопросов")
_add("ru", "name", "названия названий имени имён имен заголовка заголовков")

#: Chinese units after a number (no word boundaries): unit -> canonical unit.
ZH_UNITS = {"字": "character", "个字": "character", "汉字": "character", "字符": "character", "词": "word",
            "个词": "word", "个单词": "word", "单词": "word", "句话": "sentence", "句": "sentence",
            "个句子": "sentence", "段话": "paragraph", "段落": "paragraph", "段": "paragraph", "个段落": "paragraph",
            "行": "line", "页": "page", "条": "item", "点": "item", "个要点": "item", "个例子": "item",
            "个建议": "item", "个问题": "item", "个原因": "item", "个步骤": "item", "个名字": "name",
            "个标题": "name", "个关键词": "name", "个token": "token", "个 token": "token"}

#: Number words (value); compounds ("twenty-five", "two hundred") are summed / multiplied.
NUMBER_WORDS = {
    # en
    "a": 1, "an": 1, "one": 1, "single": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
    "thousand": 1000, "couple": 2, "few": 3, "dozen": 12,
    # de
    "ein": 1, "eine": 1, "einen": 1, "einem": 1, "einer": 1, "eins": 1, "zwei": 2, "drei": 3, "vier": 4,
    "fünf": 5, "sechs": 6, "sieben": 7, "acht": 8, "neun": 9, "zehn": 10, "zwölf": 12, "zwanzig": 20,
    "dreißig": 30, "fünfzig": 50, "hundert": 100, "tausend": 1000,
    # fr
    "un": 1, "une": 1, "deux": 2, "trois": 3, "quatre": 4, "cinq": 5, "sept": 7, "huit": 8, "neuf": 9,
    "dix": 10, "douze": 12, "vingt": 20, "trente": 30, "cinquante": 50, "cent": 100, "mille": 1000,
    # es
    "uno": 1, "una": 1, "dos": 2, "tres": 3, "cuatro": 4, "cinco": 5, "seis": 6, "siete": 7, "ocho": 8,
    "nueve": 9, "diez": 10, "doce": 12, "veinte": 20, "treinta": 30, "cincuenta": 50, "cien": 100, "mil": 1000,
    # ru
    "один": 1, "одно": 1, "одна": 1, "одним": 1, "одном": 1, "одной": 1, "одного": 1, "одну": 1, "два": 2,
    "две": 2, "двух": 2, "три": 3, "трёх": 3, "трех": 3, "четыре": 4, "пять": 5, "пяти": 5, "шесть": 6,
    "семь": 7, "восемь": 8, "девять": 9, "десять": 10, "десяти": 10, "двадцать": 20, "пятьдесят": 50,
    "сто": 100, "тысяча": 1000, "тысячи": 1000,
}
ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8,
             "九": 9}
ZH_MULT = {"十": 10, "百": 100, "千": 1000, "万": 10000}

#: Range joiners between two numbers ("3-5", "3 to 5", "3 bis 5", "от 3 до 5", "3到5").
RANGE_JOIN = r"(?:-|–|—|~|to|or|bis|oder|à|ou|a|o|y|до|или|到|至)"
#: Qualifiers before a number: at most / at least / about (phrases end right before the number).
PRE_MAX = ("at most", "no more than", "not more than", "max", "max.", "maximum", "maximum of", "a maximum of",
           "up to", "under", "less than", "fewer than", "within", "not exceeding", "not to exceed", "limit of",
           "limited to", "limit it to", "no longer than", "≤", "<=", "<",
           "höchstens", "maximal", "nicht mehr als", "weniger als", "unter", "bis zu", "nicht länger als",
           "au plus", "au maximum", "pas plus de", "moins de", "jusqu'à", "ne dépassant pas",
           "como máximo", "máximo", "no más de", "menos de", "hasta", "como mucho",
           "не более", "не больше", "максимум", "до", "менее", "меньше", "не длиннее", "не превышающий")
PRE_MIN = ("at least", "minimum", "minimum of", "a minimum of", "no less than", "not less than", "no fewer than",
           "more than", "over", "≥", ">=",
           "mindestens", "wenigstens", "mehr als", "über", "nicht weniger als",
           "au moins", "au minimum", "minimum de", "plus de", "pas moins de",
           "al menos", "como mínimo", "mínimo", "más de", "no menos de", "por lo menos",
           "не менее", "не меньше", "минимум", "как минимум", "более", "больше", "свыше")
PRE_ABOUT = ("about", "around", "approximately", "approx.", "roughly", "~", "circa", "some",
             "etwa", "ungefähr", "ca.", "rund", "environ", "à peu près", "autour de",
             "aproximadamente", "unas", "unos", "alrededor de", "cerca de", "около", "примерно", "приблизительно",
             "порядка")
POST_MAX = ("or less", "or fewer", "max", "maximum", "at most", "tops", "or under", "oder weniger", "maximal",
            "höchstens", "ou moins", "au maximum", "maximum", "o menos", "como máximo", "máximo", "или меньше",
            "максимум", "не более")
POST_MIN = ("or more", "minimum", "at least", "or longer", "oder mehr", "mindestens", "ou plus", "au moins",
            "o más", "como mínimo", "или больше", "минимум")
#: Prepositions that may stand between a maximum / minimum and its number ("at most of", "höchstens in
#: zwei Sätzen", "au plus en deux phrases", "como máximo en dos frases", "максимум в двух предложениях").
QUALIFIER_PREPOSITIONS = ("of", "in", "auf", "mit", "en", "dans", "con", "в")
ZH_PRE_MAX = ("不超过", "不多于", "最多", "少于", "不要超过", "控制在", "限")
ZH_PRE_MIN = ("不少于", "至少", "不低于", "超过", "多于")
ZH_PRE_ABOUT = ("大约", "约", "大概")
ZH_POST_MAX = ("以内", "之内", "内", "以下")
ZH_POST_MIN = ("以上",)
ZH_POST_ABOUT = ("左右", "上下")

#: A size that applies to each of several parts ("200 words each", "per section").
PER_UNIT_AFTER = (r"^\s*(?:[^\W\d_]+\s+){0,2}?(?:each|apiece|per\b|for each|for every|jeweils|pro\b|je\b|chacun|chacune|"
                  r"par \w+|pour chaque|cada|por cada|каждый|каждая|каждое|на каждый|для каждого|每)")
PER_UNIT_BEFORE = (r"(?:\beach\b|\bevery\b|\bper\b|\bjede[rsnm]?\b|\bjeweils\b|\bchaque\b|\bcada\b|кажд|每)"
                   r"(?!\s*(?:answer|response|reply|message|output|time|antwort|réponse|respuesta|ответ|次))"
                   r"[^.!?\n:;]{0,40}$")
#: A size that describes given material, not the answer: "the text below has 3000 words".
DESCRIPTIVE_BEFORE = (r"(?:\b(?:has|have|had|contains?|containing|consists? of|comprises?|is|was|are|were|"
                      r"totals?|hat|haben|enthält|umfasst|besteht aus|ist|sind|war|contient|comporte|compte|"
                      r"fait|est|sont|tiene|tienen|contiene|consta de|es|son|mide|содержит|состоит из|имеет|"
                      r"насчитывает|это)\b|有|包含|共有|一共|长达)"
                      r"(?:\s+(?:about|around|over|nearly|almost|roughly|approximately|exactly|only|just|"
                      r"etwa|über|fast|environ|plus de|casi|más de|около|более|почти)){0,2}\s*$")
#: Material someone reads: "Sarah reads a 120-page book" (a word problem), "I am reading a 300-page report".
READ_BEFORE = (r"\b(?:reads?|reading|read through|has read|have read|liest|lit|lee|читает)\s+"
               r"(?:(?:a|an|the|his|her|their|my|this|that|ein|eine|einen|un|une|le|la|el)\s+)?$")
POSSESSIVE_BEFORE = (r"(?:\b(?:my|this|that|these|the following|following|the attached|attached|your|our|his|"
                     r"her|their|mein|meine|meinen|dieser|diese|dieses|diesen|folgende|folgenden|ce|cet|cette|"
                     r"mon|ma|mes|le texte de|este|esta|mi|mis|siguiente|этот|эта|это|мой|моя|мою|данный)\b|"
                     r"这篇|这段|我的)\s*$")
#: Words that make a clause a request even after "is": "the limit is 50 words".
REQUEST_MARKERS = (r"\b(?:limit|length|count|should|must|need|needs|has to|have to|required|want|"
                   r"soll|sollte|muss|doit|devrait|debe|debería|должн|нужн)")

#: A request in the clause before a count of list items or before "a sentence" / "a paragraph".
REQUEST_VERBS = (r"(?:\b(?:write|give|list|suggest|generate|create|provide|make|name|brainstorm|come up with|"
                 r"recommend|propose|share|prepare|draft|outline|identify|extract|offer|compose|craft|produce|"
                 r"summari[sz]e|describe|explain|answer|reply|respond|tell|form|need|want|in|into|with|as|using|"
                 r"schreibe?|gib|nenne|erstelle|liste|fasse|beschreibe|erkläre|mit|écris|écrivez|donne|donnez|"
                 r"proposez?|listez?|énumère|résumez?|décris|explique|en|avec|escribe|dame|da|enumera|sugiere|"
                 r"genera|crea|resume|describe|explica|con|напиши|дай|перечисли|предложи|придумай|составь|"
                 r"опиши|объясни|перескажи)\b|写|给|列出|列举|提供|生成|总结|概括|用)")
#: A request verb proper (no prepositions): a user message whose sized zone has one asks for that size,
#: so it may override the size of the system instructions (:func:`sjf_core.predict._stated.read_size`).
ASK_VERBS = (r"(?:\b(?:write|give|list|suggest|generate|create|provide|make|name|brainstorm|come up with|"
             r"recommend|propose|prepare|draft|outline|compose|craft|produce|summari[sz]e|describe|explain|tell|"
             r"schreib\w*|gib|nenne|erstelle|liste|fasse|beschreibe|erkläre|verfasse|"
             r"écri\w*|rédige\w*|donne\w*|propose\w*|liste\w*|énumère\w*|résume\w*|décri\w*|explique\w*|"
             r"escrib\w*|redacta|dame|enumera|sugiere|genera|crea|resume|describe|explica|"
             r"напиши|дай|перечисли|предложи|придумай|составь|опиши|объясни|перескажи|подготовь\w*)\b|"
             r"写|列出|列举|生成|总结|概括|介绍|解释)")
#: An answer directive right before a closed form ("answer only with", "reply with", "nur mit").
DIRECTIVE = (r"(?:answer|reply|respond|say|tell|output|return|write|give|only|just|simply|solely|nothing but|"
             r"antwort\w*|nur|réponds|répondez|répondre|réponse|seulement|uniquement|responde\w*|solo|sólo|"
             r"únicamente|ответ\w*|только|回答|只|仅|直接)[^.!?\n]{0,32}$")
#: Words between a number and "word(s)" that make it something else ("5-letter words").
GAP_EXCLUDE = frozenset("letter letters character characters syllable syllables digit digits buchstaben "
                        "lettres letras букв буквы".split())
#: A page of a website is not a page of text.
PAGE_NOT_TEXT = r"^[\s-]*(?:web)?(?:site|app|application|component|layout|view|html|react|vue|angular|pdf)"

#: Closed answer forms: (regular expression on the lower-cased window, label, answer tokens, trigger words:
#: the expression runs only when one of them is a word of the window, or for CJK ones a substring).
#: Forms not in :data:`UNDIRECTED` count only after an answer directive (:data:`DIRECTIVE`) or at the end
#: of a question.
CLOSED_FORMS = (
    (r"\byes or no\b|\byes/no\b|\btrue or false\b|\bja oder nein\b|\bja/nein\b|\boui ou non\b|\bvrai ou faux\b|"
     r"\bs[ií] o no\b|\bverdadero o falso\b|\bда или нет\b|\bда/нет\b|是或否|是或不是|对或错|“是”或“否”", "yes/no", 2.0,
     "yes true ja oui vrai sí si да verdadero 是或 对或错"),
    (r"\b(?:one|a single|1)[\s-]word\b|\b(?:in )?(?:einem|ein) (?:einzigen )?wort\b|"
     r"\b(?:en )?un (?:seul )?mot\b|\b(?:en )?una (?:sola )?palabra\b|\bодн(?:им|о) слов(?:ом|о)\b|一个词|一个字回答",
     "one word", 3.0,
     "word wort einem ein mot palabra слово словом 一个词 一个字回答"),
    (r"\b(?:only|just) the (?:name|title)\b|\bthe (?:name|title) only\b|\bnur (?:den|der|mit dem) (?:namen|titel)\b|"
     r"\b(?:seulement|uniquement) le (?:nom|titre)\b|\bsolo el (?:nombre|título)\b|\bтолько (?:имя|название)\b|"
     r"只(?:回答|写|给出|输出)(?:名字|名称|标题)", "name only", 5.0,
     "name title namen titel nom titre nombre título имя название 名字 名称 标题"),
    (r"\b(?:a single|only the|just the|only a|just a) number\b|\bthe number only\b|\bnur (?:die|eine) zahl\b|"
     r"\b(?:seulement|uniquement) (?:par )?(?:le|un) nombre\b|\bsolo (?:el|un) número\b|\bтолько (?:число|числом|цифру|цифрой)\b|"
     r"只(?:回答|写|给出|输出)(?:数字|一个数字)", "number only", 3.0,
     "number zahl nombre número число числом цифру цифрой 数字"),
    (r"\b(?:only|just) the (?:letter|option)\b|\bnur den buchstaben\b|\bseulement la lettre\b|\bsolo la letra\b|"
     r"\bтолько букву\b|只(?:回答|写|给出|输出)(?:选项|字母)", "letter only", 2.0, "letter option buchstaben lettre letra букву 选项 字母"),
    (r"\bone[\s-]liner\b", "one line", 13.0, "liner"),
    (r"\b(?:only|just) (?:the|your) (?:final )?answer\b|\bthe answer only\b|\banswer only\b|\bnur die antwort\b|"
     r"\b(?:seulement|uniquement) la réponse\b|\bsolo la respuesta\b|\bтолько ответ\b|只(?:回答|给出|输出)答案|直接给出答案",
     "answer only", 8.0,
     "answer antwort réponse respuesta ответ 答案"),
)
#: Closed forms that need no directive before them (indices into :data:`CLOSED_FORMS`): they are
#: directives themselves ("only the name", "answer only", "one-liner").
UNDIRECTED = frozenset((2, 3, 4, 5, 6))

#: Verbosity cues: (regular expression, label, direction -1 shorter / +1 longer, trigger words).
VAGUE_CUES = (
    (r"\bbriefly\b|\bbrief\b|\bconcise(?:ly)?\b|\bsuccinct(?:ly)?\b|\btl;?dr\b|\bin short\b|\bkeep it short\b|"
     r"\bshort (?:answer|response|reply|summary|description|paragraph|text|message|note|caption|bio|intro)\b|"
     r"\bkurz(?:e[nrs]?)?\b|\bknapp(?:e[nrs]?)?\b|\bprägnant\b|\bbri[eè]ve(?:ment)?\b|\bbref\b|\bconcis[e]?\b|"
     r"\bbreve(?:mente)?\b|\bconcis[oa]\b|\bкратк(?:о|ий|ое|ая)\b|\bкоротко\b|\bсжато\b|简短|简要|简洁|简述", "brief", -1,
     """briefly brief concise concisely succinct succinctly tl tldr short kurz kurze kurzen kurzer kurzes knapp
     knappe knappen knapper prägnant bref brève brièvement concis breve brevemente conciso concisa кратко краткий
     краткое краткая коротко сжато 简短 简要 简洁 简述"""),
    (r"\bin (?:great |full )?detail\b|\bdetailed\b|\bcomprehensive\b|\bin[\s-]depth\b|\bthorough(?:ly)?\b|"
     r"\bextensive(?:ly)?\b|\blengthy\b|\blong (?:essay|article|story|answer|response|text|post|letter|report)\b|"
     r"\bausführlich(?:e[nrs]?)?\b|\bdetailliert(?:e[nrs]?)?\b|\bumfassend(?:e[nrs]?)?\b|\ben détail\b|"
     r"\bdétaillée?s?\b|\bapprofondie?s?\b|\ben detalle\b|\bdetallad[oa]s?\b|\bexhaustiv[oa]\b|"
     r"\bподробн(?:о|ый|ое|ая)\b|\bдетально\b|\bразв[её]рнуто\b|详细|详尽|深入|全面", "detailed", 1,
     """detail detailed comprehensive depth thorough thoroughly extensive extensively lengthy long ausführlich
     ausführliche ausführlichen ausführlicher detailliert detaillierte detaillierten umfassend umfassende umfassenden
     détail détaillé détaillée détaillés approfondi approfondie detalle detallado detallada detallados exhaustivo
     exhaustiva подробно подробный подробное подробная детально развернуто развёрнуто 详细 详尽 深入 全面"""),
)

#: Instruction that points forward at material ("the text below:") or back at it ("the text above").
#: Words of an instruction that points forward at material ("the text below:") ...
FORWARD_WORDS = frozenset("""below following unten folgende folgenden folgender folgendes dessous suivant suivante
suivants suivantes siguiente siguientes continuación ниже следующий следующая следующее следующие следующего
следующем следующую""".split())
#: ... or back at it ("the text above"); and the nouns of "this text", "the article" (then a phrase check).
BACK_WORDS = frozenset("above oben obigen obige obiges obiger dessus anterior arriba выше вышеуказанный".split())
MATERIAL_NOUNS = frozenset("""text article passage email essay story document conversation paragraph texte texto
текст""".split())
BACK_PHRASES = ("this text", "the text", "this article", "the article", "this passage", "the passage", "this email",
                "the email", "this essay", "the essay", "this story", "this document", "the document",
                "this conversation", "the conversation", "this paragraph", "diesen text", "dieser text", "ce texte",
                "el texto", "este texto", "этот текст")
#: Nouns by which system instructions name the user's message as material ("Classify the tone of the
#: user's text.", "Bestimme den Ton der Nachricht."): then a size in the user's message is the
#: material's, and the instructions' size is the answer's (:func:`sjf_core.predict._stated.read_size`).
INSTRUCTION_MATERIAL = frozenset("""text texts message messages email emails conversation transcript article
passage document review reviews tweet snippet nachricht nachrichten e-mail gespräch dokument artikel texte
courriel document mensaje mensajes texto textos correo conversación documento сообщение сообщения сообщению
текст текста письмо переписку""".split())
ZH_INSTRUCTION_MATERIAL = ("消息", "文本", "对话", "邮件", "文章", "这段")
ZH_FORWARD = ("以下", "如下")
ZH_BACK = ("上面", "上述", "上文", "这段", "这篇")
