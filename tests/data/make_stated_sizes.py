"""Build tests/data/stated_sizes.jsonl: our labelled set of prompts that state the size of the
answer they want (issue 23). Every prompt and pasted passage here was written for this project.

Run from the repository root: ``python tests/data/make_stated_sizes.py`` (deterministic).

Row fields: id, lang (en de fr es ru zh), prompt, system (optional), kind ("count" | "closed"),
unit / lo / hi / qual (counts: "exact", "max", "min", "about", "range"), form (closed forms),
app (a template over pasted text), trap (the pasted text or the prompt carries a size that is not
the answer's), stated_tokens (the labelling rule below), split ("tune" | "test").

Labelling rule (fixed before any tuning): stated tokens = the stated count (a range: its midpoint; a
bound: the bound) × tokens per unit of the language (sjf_core.predict._stated_words: Tekken tokens per
word en 1.27, de 1.75, fr 1.46, es 1.57, ru 2.36, zh 1.11 per character; a sentence 25 words, a
paragraph 100, a line 10, a page 500, a list item 30, a name/title item 8); closed forms: yes/no 2,
one word 3, name only 5, number only 3, answer only 8 tokens.

Split (fixed before any tuning): "test" when the first byte of sha256(id) is even, else "tune".
The reader and its combination with the model were tuned on "tune" rows only.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from sjf_core.predict import _stated_words as W  # noqa: E402

CLOSED = {"yes/no": 2.0, "one word": 3.0, "name only": 5.0, "number only": 3.0, "answer only": 8.0}

# ---- pasted passages (ours); TRAP_* carry a size that belongs to the passage, not to the answer ----
EN_P = [
    "The harbour authority met on Tuesday to review the winter dredging schedule. Two of the four berths "
    "will close for six weeks, and container traffic is expected to move to the northern terminal. "
    "Fishermen asked for a guarantee that the small-boat slip stays open; the authority agreed to keep "
    "one lane clear and to publish weekly updates on its website. A final decision on the budget for "
    "the new breakwater was postponed until the spring meeting.",
    "Our team switched the nightly build from a single large machine to a pool of smaller runners. "
    "Build times dropped from forty minutes to eleven, but flaky tests became more visible because "
    "they now run in a different order every night. We added a quarantine list and a weekly review "
    "of the slowest twenty tests, and we now cache dependencies per branch instead of per commit.",
    "My grandmother kept bees for almost fifty years. Every August she would take the frames out in "
    "the early morning, before the heat, and spin the honey in the shed behind the house. She never "
    "wore gloves and claimed the bees knew her. The honey was dark in dry years and pale in wet ones, "
    "and she labelled every jar with the year and the name of the field nearest to the hives.",
]
TRAP_EN = [
    "Hi all,\n\nPlease write 500 words on the quarterly results by Friday; the board wants a full "
    "narrative, at least 3 pages, covering sales, costs and hiring. Keep the tone factual.\n\nThanks,\nDana",
    "The essay below has 3000 words and was submitted late. It argues that city libraries should open "
    "on Sundays, that the cost is small compared with the benefit to families, and that volunteers "
    "could staff the quieter hours. It cites three surveys and a pilot project in a nearby town.",
    "Assignment brief: write a 2000-word report on renewable energy in coastal towns, with 10 "
    "references and at least 5 figures. Deadline: the end of the month. Late work loses marks.",
]
DE_P = [
    "Die Stadtverwaltung hat am Montag beschlossen, die Buslinie 12 ab dem Frühjahr bis zum neuen "
    "Krankenhaus zu verlängern. Die Fahrzeit vom Bahnhof verlängert sich um sieben Minuten, dafür "
    "entfällt das Umsteigen am Marktplatz. Anwohner hatten sich über fehlende Haltestellen beklagt; "
    "zwei zusätzliche Haltestellen sind nun vorgesehen.",
    "Liebe Kolleginnen und Kollegen, bitte schreibt bis Freitag einen Bericht mit mindestens 800 "
    "Wörtern über das Projekt. Er soll die Kosten, den Zeitplan und die offenen Risiken behandeln. "
    "Danke und viele Grüße, Jana",
]
FR_P = [
    "La mairie a présenté hier son plan pour les pistes cyclables du centre-ville. Trois rues "
    "deviendront à sens unique pour les voitures, et un parking de vélos sera construit près de la "
    "gare. Les commerçants craignent une baisse de la fréquentation, tandis que les associations de "
    "cyclistes saluent un projet attendu depuis dix ans.",
    "Bonjour à tous, merci de rédiger un compte rendu d'au moins 600 mots sur la réunion de lundi, "
    "avec les décisions prises et les prochaines étapes. Bonne journée, Luc",
]
ES_P = [
    "El ayuntamiento anunció que el mercado central cerrará dos meses por obras de renovación. Los "
    "puestos se trasladarán a una carpa en la plaza mayor y el horario se ampliará los sábados. Los "
    "vendedores piden ayudas para cubrir la mudanza y temen perder clientes durante el verano.",
    "Hola equipo: por favor, escribid un informe de 1500 palabras sobre las ventas del trimestre, con "
    "al menos 4 gráficos. Gracias, Marta",
]
RU_P = [
    "В понедельник городской совет утвердил план ремонта набережной. Работы начнутся весной и "
    "продлятся около полугода; на это время пешеходную зону перенесут на соседнюю улицу. Жители "
    "просили сохранить старые фонари, и совет обещал восстановить их после ремонта.",
    "Коллеги, подготовьте, пожалуйста, отчёт не менее 1000 слов о результатах проекта к пятнице. "
    "Спасибо, Ольга",
]
ZH_P = [
    "市政府周一宣布，将在明年春天开通一条连接火车站和新医院的公交线路。新线路每十五分钟一班，"
    "沿途设有八个站点。部分居民担心施工期间交通拥堵，政府表示将在夜间施工以减少影响。",
    "各位同事：请在周五之前写一篇不少于2000字的项目总结，包括成本、进度和风险。谢谢！",
]


def c(lang, prompt, unit, lo, hi=None, qual="exact", system=None, app=False, trap=False):
    return {"lang": lang, "prompt": prompt, "system": system, "kind": "count", "unit": unit, "lo": lo,
            "hi": hi if hi is not None else lo, "qual": "range" if hi is not None else qual, "app": app,
            "trap": trap}


def k(lang, prompt, form, system=None, app=False, trap=False):
    return {"lang": lang, "prompt": prompt, "system": system, "kind": "closed", "form": form, "app": app,
            "trap": trap}


def en_rows():
    r = [
        c("en", "Write a 3000-word short story about a lighthouse keeper who finds a message in a bottle.", "word", 3000),
        c("en", "Give me a title of at most 6 words for a blog post about sourdough starters.", "word", 6, qual="max"),
        c("en", "List 50 names for a bakery that specialises in rye bread.", "name", 50),
        c("en", "Explain how vaccines train the immune system in under 50 words.", "word", 50, qual="max"),
        c("en", "Write an essay of at least 1200 words on the causes of the First World War.", "word", 1200, qual="min"),
        c("en", "Describe the water cycle in 3-5 sentences for a ten-year-old.", "sentence", 3, 5),
        c("en", "Summarise the plot of Hamlet in one sentence.", "sentence", 1),
        c("en", "Write a 10-page design document for a chat application with end-to-end encryption.", "page", 10),
        c("en", "Write two paragraphs about the history of the bicycle.", "paragraph", 2),
        c("en", "In 20 words or fewer, what is a black hole?", "word", 20, qual="max"),
        c("en", "Give me 10 ideas for a rainy Sunday with two small children.", "item", 10),
        c("en", "Write a haiku-length poem of 3 lines about autumn rain.", "line", 3),
        c("en", "Write a product description of about 150 words for a stainless steel water bottle.", "word", 150, qual="about"),
        c("en", "Draft a cover letter of no more than 300 words for a junior accountant role.", "word", 300, qual="max"),
        c("en", "Write a tweet (max 280 characters) announcing our new opening hours.", "character", 280, qual="max"),
        c("en", "Suggest 5 titles for a podcast about urban gardening.", "name", 5),
        c("en", "Write a 500-word blog post on the benefits of walking meetings.", "word", 500),
        c("en", "Explain recursion in exactly two sentences.", "sentence", 2),
        c("en", "Write a detailed 2,000 word guide to setting up a home aquarium.", "word", 2000),
        c("en", "Please describe the French Revolution in a single paragraph.", "paragraph", 1),
        c("en", "Write a limerick: five lines about a cat who hates Mondays.", "line", 5),
        c("en", "Give me a 4-line poem for a birthday card.", "line", 4),
        c("en", "Write between 200 and 250 words on why sleep matters for students.", "word", 200, 250),
        c("en", "Write a 1500-word feature article about night trains in Europe.", "word", 1500),
        c("en", "Create a list of 20 interview questions for a data engineer.", "item", 20),
        c("en", "Write a story for children of roughly 800 words about a brave snail.", "word", 800, qual="about"),
        c("en", "Summarize the benefits of unit testing in 3 bullet points.", "item", 3),
        c("en", "Write a speech of at least 1,000 words for a school graduation.", "word", 1000, qual="min"),
        c("en", "Write a five-page report on the state of bee populations in Europe.", "page", 5),
        c("en", "In one short paragraph, explain what an API is.", "paragraph", 1),
        k("en", "Answer with yes or no: is Canberra the capital of Australia?", "yes/no"),
        k("en", "Who wrote 'Pride and Prejudice'? Answer with the name only.", "name only"),
        k("en", "How many legs does a spider have? Reply with a single number.", "number only"),
        k("en", "What is the sentiment of this review, in one word: 'The battery died after two days.'", "one word"),
        k("en", "Is 97 a prime number? Just answer yes or no.", "yes/no"),
        k("en", "Give only the answer, no explanation: what is 17 times 23?", "answer only"),
        k("en", "Which planet is closest to the sun? One word.", "one word"),
        k("en", "True or false: water boils at 90 degrees Celsius at sea level?", "yes/no"),
    ]
    for i, p in enumerate(EN_P):
        r += [
            c("en", f"Give this text a title of at most 6 words: {p}", "word", 6, qual="max", app=True),
            c("en", f"Summarise the text below in one sentence.\n\n{p}", "sentence", 1, app=True),
            k("en", f"What is the overall sentiment of the following text? Answer in one word.\n\n\"\"\"\n{p}\n\"\"\"",
              "one word", app=True),
            c("en", f"{p}\n\nSummarize the text above in 3 bullet points.", "item", 3, app=True),
            c("en", p, "word", 3, 5, system="You generate titles. Reply with a title of 3-5 words and nothing else.",
              app=True),
        ]
    for i, p in enumerate(TRAP_EN):
        r += [
            c("en", f"Summarise this email in two sentences:\n\n{p}", "sentence", 2, app=True, trap=True),
            c("en", f"Give the following text a title of at most 8 words.\n\n{p}", "word", 8, qual="max", app=True, trap=True),
            k("en", p, "one word", system="Classify the tone of the user's text. Reply with one word only.",
              app=True, trap=True),
        ]
    r += [
        c("en", "The text below has 3000 words. Summarise it in one sentence.\n\n" + EN_P[0] + " " + EN_P[1],
          "sentence", 1, app=True, trap=True),
        c("en", "My 2000-word essay is below. Give it a title of 4-6 words.\n\n" + EN_P[2], "word", 4, 6,
          app=True, trap=True),
        c("en", "What is a mortgage?", "sentence", 2, qual="max",
          system="You are a helpful assistant. Keep every answer to no more than 2 sentences."),
        c("en", "Write three paragraphs of about 150 words each on the history of tea.", "word", 450),
        c("en", "Give me a one-paragraph summary of how a bill becomes law in the US.", "paragraph", 1),
        c("en", "Write a cover story of 1,800 words for our company magazine about the new warehouse.", "word", 1800),
        c("en", "Reply in 40 words or less: why is the sky blue?", "word", 40, qual="max"),
        c("en", "Plan a week of dinners", "item", 7, system="List exactly 7 items, one per line."),
        k("en", "Does this sentence contain a spelling error? 'The comittee met on Friday.' Answer yes or no.", "yes/no"),
        c("en", "Please write at least 2500 words explaining the history of the printing press.", "word", 2500, qual="min"),
    ]
    return r


def de_rows():
    r = [
        c("de", "Schreibe eine Geschichte mit höchstens 200 Wörtern über einen Hund, der das Meer sucht.", "word", 200, qual="max"),
        c("de", "Fasse die Handlung von Faust in einem Satz zusammen.", "sentence", 1),
        c("de", "Schreibe einen Aufsatz von mindestens 1500 Wörtern über den Klimawandel.", "word", 1500, qual="min"),
        c("de", "Erkläre die Photosynthese in drei Sätzen.", "sentence", 3),
        c("de", "Nenne 10 Ideen für ein Kindergeburtstagsfest.", "item", 10),
        c("de", "Schreibe einen Blogartikel mit etwa 800 Wörtern über das Wandern im Harz.", "word", 800, qual="about"),
        c("de", "Gib mir einen Titel mit maximal 5 Wörtern für einen Vortrag über Datenschutz.", "word", 5, qual="max"),
        c("de", "Schreibe zwei Absätze über die Geschichte der Eisenbahn in Deutschland.", "paragraph", 2),
        c("de", "Schreibe ein Gedicht mit 8 Zeilen über den Herbst.", "line", 8),
        c("de", "Beschreibe in 3 bis 5 Sätzen, wie ein Kühlschrank funktioniert.", "sentence", 3, 5),
        c("de", "Verfasse eine Rede von 1000 Wörtern zum Jubiläum unseres Vereins.", "word", 1000),
        c("de", "Schreibe eine Produktbeschreibung mit weniger als 100 Wörtern für einen Rucksack.", "word", 100, qual="max"),
        c("de", "Schreibe einen Bericht von 5 Seiten über erneuerbare Energien.", "page", 5),
        c("de", "Erkläre in einem kurzen Absatz, was ein Algorithmus ist.", "paragraph", 1),
        k("de", "Antworte nur mit Ja oder Nein: Ist Berlin die Hauptstadt von Deutschland?", "yes/no"),
        k("de", "Wer hat die Relativitätstheorie entwickelt? Nenne nur den Namen.", "name only"),
        k("de", "Wie viele Tage hat ein Schaltjahr? Antworte nur mit der Zahl.", "number only"),
        k("de", "Welche Stimmung hat dieser Satz, in einem Wort: 'Der Urlaub war leider verregnet.'", "one word"),
    ]
    for p in DE_P[:1]:
        r += [
            c("de", f"Gib diesem Text einen Titel mit höchstens 6 Wörtern: {p}", "word", 6, qual="max", app=True),
            c("de", f"Fasse den folgenden Text in einem Satz zusammen.\n\n{p}", "sentence", 1, app=True),
            c("de", f"{p}\n\nFasse den obigen Text in 3 Stichpunkten zusammen.", "item", 3, app=True),
            k("de", f"Welche Stimmung hat der folgende Text? Antworte mit einem Wort.\n\n\"\"\"\n{p}\n\"\"\"", "one word", app=True),
            c("de", p, "word", 3, 5, system="Du erstellst Überschriften. Antworte mit einer Überschrift aus 3 bis 5 Wörtern.", app=True),
        ]
    p = DE_P[1]
    r += [
        c("de", f"Fasse diese E-Mail in zwei Sätzen zusammen:\n\n{p}", "sentence", 2, app=True, trap=True),
        c("de", f"Gib der folgenden Nachricht einen Titel mit höchstens 5 Wörtern.\n\n{p}", "word", 5, qual="max", app=True, trap=True),
        k("de", p, "one word", system="Bestimme den Ton der Nachricht. Antworte nur mit einem Wort.", app=True, trap=True),
        c("de", "Schreibe einen Roman-Auszug von 3000 Wörtern über eine Reise nach Norwegen.", "word", 3000),
        c("de", "Was ist ein Zinseszins?", "sentence", 2, qual="max",
          system="Du bist ein Assistent. Antworte immer in höchstens 2 Sätzen."),
        k("de", "Ist die Zugspitze höher als der Brocken? Antworte mit Ja oder Nein.", "yes/no"),
    ]
    return r


def fr_rows():
    r = [
        c("fr", "Écris une histoire de 2000 mots sur un phare abandonné.", "word", 2000),
        c("fr", "Résume l'intrigue des Misérables en une phrase.", "sentence", 1),
        c("fr", "Explique la photosynthèse en moins de 50 mots.", "word", 50, qual="max"),
        c("fr", "Rédige un essai d'au moins 1000 mots sur l'éducation numérique.", "word", 1000, qual="min"),
        c("fr", "Donne-moi 10 idées de cadeaux pour un professeur.", "item", 10),
        c("fr", "Décris la tour Eiffel en trois phrases.", "sentence", 3),
        c("fr", "Écris deux paragraphes sur l'histoire du cinéma français.", "paragraph", 2),
        c("fr", "Propose un titre de 5 mots maximum pour un article sur le jardinage.", "word", 5, qual="max"),
        c("fr", "Écris un poème de 12 lignes sur la mer.", "line", 12),
        c("fr", "Rédige un article d'environ 600 mots sur le vélo en ville.", "word", 600, qual="about"),
        c("fr", "Écris un rapport de 4 pages sur la qualité de l'air à Paris.", "page", 4),
        c("fr", "Explique en 2 à 4 phrases ce qu'est une inflation.", "sentence", 2, 4),
        c("fr", "Écris un discours de 800 mots pour un mariage.", "word", 800),
        c("fr", "Rédige une description de produit de 100 mots pour une lampe de bureau.", "word", 100),
        k("fr", "Réponds par oui ou non : la Seine traverse-t-elle Paris ?", "yes/no"),
        k("fr", "Qui a écrit Les Misérables ? Donne seulement le nom.", "name only"),
        k("fr", "Combien de continents y a-t-il ? Réponds uniquement par un nombre.", "number only"),
        k("fr", "Quel est le sentiment de cette phrase, en un mot : « Le repas était délicieux. »", "one word"),
    ]
    p = FR_P[0]
    r += [
        c("fr", f"Donne à ce texte un titre d'au plus 6 mots : {p}", "word", 6, qual="max", app=True),
        c("fr", f"Résume le texte ci-dessous en une phrase.\n\n{p}", "sentence", 1, app=True),
        c("fr", f"{p}\n\nRésume le texte ci-dessus en 3 points.", "item", 3, app=True),
        k("fr", f"Quel est le sentiment du texte suivant ? Réponds en un mot.\n\n\"\"\"\n{p}\n\"\"\"", "one word", app=True),
        c("fr", p, "word", 3, 5, system="Tu crées des titres. Réponds avec un titre de 3 à 5 mots.", app=True),
    ]
    p = FR_P[1]
    r += [
        c("fr", f"Résume ce message en deux phrases :\n\n{p}", "sentence", 2, app=True, trap=True),
        c("fr", f"Donne au texte suivant un titre de 5 mots au maximum.\n\n{p}", "word", 5, qual="max", app=True, trap=True),
        k("fr", p, "one word", system="Indique le ton du message. Réponds en un seul mot.", app=True, trap=True),
        c("fr", "Écris une nouvelle de 3000 mots sur un voyage en train de nuit.", "word", 3000),
        c("fr", "Qu'est-ce qu'un taux d'intérêt ?", "sentence", 2, qual="max",
          system="Tu es un assistant. Réponds toujours en 2 phrases au maximum."),
        k("fr", "Le Rhône se jette-t-il dans la Méditerranée ? Réponds par oui ou non.", "yes/no"),
    ]
    return r


def es_rows():
    r = [
        c("es", "Escribe un cuento de 2000 palabras sobre el mar y un viejo pescador.", "word", 2000),
        c("es", "Resume la trama de Don Quijote en una frase.", "sentence", 1),
        c("es", "Explica la gravedad en menos de 50 palabras.", "word", 50, qual="max"),
        c("es", "Escribe un ensayo de al menos 1200 palabras sobre la inteligencia artificial.", "word", 1200, qual="min"),
        c("es", "Dame 10 ideas para una fiesta de cumpleaños infantil.", "item", 10),
        c("es", "Describe el ciclo del agua en tres oraciones.", "sentence", 3),
        c("es", "Escribe dos párrafos sobre la historia del flamenco.", "paragraph", 2),
        c("es", "Propón un título de como máximo 6 palabras para un artículo sobre cocina.", "word", 6, qual="max"),
        c("es", "Escribe un poema de 8 líneas sobre la lluvia.", "line", 8),
        c("es", "Escribe un artículo de unas 700 palabras sobre el teletrabajo.", "word", 700, qual="about"),
        c("es", "Escribe un informe de 3 páginas sobre el turismo en Andalucía.", "page", 3),
        c("es", "Explica en 2 a 3 oraciones qué es una hipoteca.", "sentence", 2, 3),
        c("es", "Escribe un discurso de 900 palabras para una boda.", "word", 900),
        c("es", "Escribe una descripción de producto de 80 palabras para una silla.", "word", 80),
        k("es", "Responde sí o no: ¿es Madrid la capital de España?", "yes/no"),
        k("es", "¿Quién pintó Las Meninas? Dame solo el nombre.", "name only"),
        k("es", "¿Cuántos días tiene una semana? Responde solo el número.", "number only"),
        k("es", "¿Qué sentimiento expresa esta frase, en una palabra: «El servicio fue horrible»?", "one word"),
    ]
    p = ES_P[0]
    r += [
        c("es", f"Dale a este texto un título de como máximo 6 palabras: {p}", "word", 6, qual="max", app=True),
        c("es", f"Resume el siguiente texto en una frase.\n\n{p}", "sentence", 1, app=True),
        c("es", f"{p}\n\nResume el texto anterior en 3 puntos.", "item", 3, app=True),
        k("es", f"¿Qué sentimiento tiene el siguiente texto? Responde en una palabra.\n\n\"\"\"\n{p}\n\"\"\"", "one word", app=True),
        c("es", p, "word", 3, 5, system="Generas títulos. Responde con un título de 3 a 5 palabras.", app=True),
    ]
    p = ES_P[1]
    r += [
        c("es", f"Resume este correo en dos frases:\n\n{p}", "sentence", 2, app=True, trap=True),
        c("es", f"Dale al siguiente texto un título de máximo 5 palabras.\n\n{p}", "word", 5, qual="max", app=True, trap=True),
        k("es", p, "one word", system="Indica el tono del mensaje. Responde con una sola palabra.", app=True, trap=True),
        c("es", "Escribe una novela corta de 3000 palabras sobre un viaje en tren.", "word", 3000),
        c("es", "¿Qué es la inflación?", "sentence", 2, qual="max",
          system="Eres un asistente. Responde siempre en 2 frases como máximo."),
        k("es", "¿Es el Everest la montaña más alta del mundo? Responde sí o no.", "yes/no"),
    ]
    return r


def ru_rows():
    r = [
        c("ru", "Напиши рассказ на 2000 слов о старом маяке.", "word", 2000),
        c("ru", "Перескажи сюжет «Войны и мира» одним предложением.", "sentence", 1),
        c("ru", "Объясни, что такое гравитация, не более чем в 50 словах.", "word", 50, qual="max"),
        c("ru", "Напиши эссе не менее 1000 слов о роли библиотек.", "word", 1000, qual="min"),
        c("ru", "Предложи 10 идей для выходных с детьми.", "item", 10),
        c("ru", "Опиши круговорот воды в трёх предложениях.", "sentence", 3),
        c("ru", "Напиши два абзаца об истории Москвы.", "paragraph", 2),
        c("ru", "Придумай заголовок максимум 6 слов для статьи о садоводстве.", "word", 6, qual="max"),
        c("ru", "Напиши стихотворение из 8 строк о зиме.", "line", 8),
        c("ru", "Напиши статью примерно 700 слов об удалённой работе.", "word", 700, qual="about"),
        c("ru", "Объясни в 2-3 предложениях, что такое инфляция.", "sentence", 2, 3),
        c("ru", "Напиши речь на 800 слов для выпускного вечера.", "word", 800),
        k("ru", "Ответь да или нет: Москва — столица России?", "yes/no"),
        k("ru", "Кто написал «Евгения Онегина»? Напиши только имя.", "name only"),
        k("ru", "Сколько дней в неделе? Ответь только числом.", "number only"),
        k("ru", "Какое настроение у этой фразы, одним словом: «Поездка была ужасной».", "one word"),
    ]
    p = RU_P[0]
    r += [
        c("ru", f"Придумай для этого текста заголовок не более 6 слов: {p}", "word", 6, qual="max", app=True),
        c("ru", f"Перескажи текст ниже одним предложением.\n\n{p}", "sentence", 1, app=True),
        c("ru", f"{p}\n\nПерескажи текст выше в 3 пунктах.", "item", 3, app=True),
        k("ru", f"Какое настроение у следующего текста? Ответь одним словом.\n\n\"\"\"\n{p}\n\"\"\"", "one word", app=True),
        c("ru", p, "word", 3, 5, system="Ты придумываешь заголовки. Ответь заголовком из 3-5 слов.", app=True),
    ]
    p = RU_P[1]
    r += [
        c("ru", f"Перескажи это письмо в двух предложениях:\n\n{p}", "sentence", 2, app=True, trap=True),
        k("ru", p, "one word", system="Определи тон сообщения. Ответь одним словом.", app=True, trap=True),
        c("ru", "Напиши повесть на 3000 слов о путешествии на поезде.", "word", 3000),
        c("ru", "Что такое ипотека?", "sentence", 2, qual="max",
          system="Ты помощник. Всегда отвечай не более чем в 2 предложениях."),
        c("ru", "Напиши отчёт на 4 страницы о туризме в Карелии.", "page", 4),
    ]
    return r


def zh_rows():
    r = [
        c("zh", "写一篇不少于800字的文章，题目是《我的家乡》。", "character", 800, qual="min"),
        c("zh", "用一句话总结《红楼梦》的主要情节。", "sentence", 1),
        c("zh", "请用不超过50字解释什么是黑洞。", "character", 50, qual="max"),
        c("zh", "写一篇3000字的短篇小说，讲述一个灯塔看守人的故事。", "character", 3000),
        c("zh", "给我列出10个周末亲子活动的建议。", "item", 10),
        c("zh", "用三句话描述水循环。", "sentence", 3),
        c("zh", "写两段话介绍长城的历史。", "paragraph", 2),
        c("zh", "为一篇关于园艺的文章起一个不超过10个字的标题。", "character", 10, qual="max"),
        c("zh", "写一首8行的诗，主题是秋天。", "line", 8),
        c("zh", "写一篇500字左右的文章，谈谈远程办公的利弊。", "character", 500, qual="about"),
        c("zh", "写一份5页的报告，分析新能源汽车市场。", "page", 5),
        c("zh", "用2到3句话解释什么是通货膨胀。", "sentence", 2, 3),
        c("zh", "写一篇1000字的演讲稿，用于毕业典礼。", "character", 1000),
        c("zh", "请在200字以内介绍一下北京。", "character", 200, qual="max"),
        k("zh", "请只回答是或否：北京是中国的首都吗？", "yes/no"),
        k("zh", "《西游记》的作者是谁？只回答名字。", "name only"),
        k("zh", "一年有几个月？只回答数字。", "number only"),
        k("zh", "这句话的情感是什么？用一个词回答：“这次旅行太糟糕了。”", "one word"),
    ]
    p = ZH_P[0]
    r += [
        c("zh", f"请给下面这段文字起一个不超过10个字的标题：{p}", "character", 10, qual="max", app=True),
        c("zh", f"用一句话总结下面的文字。\n\n{p}", "sentence", 1, app=True),
        c("zh", f"{p}\n\n请用3个要点总结上面的文字。", "item", 3, app=True),
        k("zh", f"下面这段文字的情感是什么？用一个词回答。\n\n\"\"\"\n{p}\n\"\"\"", "one word", app=True),
        c("zh", p, "character", 8, 12, system="你负责起标题。请用8到12个字的标题回答。", app=True),
    ]
    p = ZH_P[1]
    r += [
        c("zh", f"用两句话总结这封邮件：\n\n{p}", "sentence", 2, app=True, trap=True),
        c("zh", f"这篇文章有3000字，请用一句话总结。\n\n{ZH_P[0]}", "sentence", 1, app=True, trap=True),
        k("zh", p, "one word", system="判断这条消息的语气。只用一个词回答。", app=True, trap=True),
        c("zh", "写一篇5000字的小说，讲述一次夜车旅行。", "character", 5000),
        c("zh", "什么是复利？", "sentence", 2, qual="max", system="你是一个助手。每次回答不超过2句话。"),
        k("zh", "珠穆朗玛峰是世界最高的山吗？请回答是或否。", "yes/no"),
    ]
    return r


def stated_tokens(row) -> float:
    if row["kind"] == "closed":
        return CLOSED[row["form"]]
    n = (row["lo"] + row["hi"]) / 2
    unit, lang = row["unit"], row["lang"]
    if unit == "character":
        return n * W.TOKENS_PER_CHAR[lang]
    words = W.WORDS_PER_UNIT[unit] * (W.ZH_CHARS_PER_WORD if lang == "zh" else 1.0)
    return n * words * W.TOKENS_PER_WORD[lang]


def main() -> int:
    rows = en_rows() + de_rows() + fr_rows() + es_rows() + ru_rows() + zh_rows()
    out = Path(__file__).with_name("stated_sizes.jsonl")
    counters: dict[str, int] = {}
    with open(out, "w", encoding="utf-8") as f:
        for row in rows:
            counters[row["lang"]] = counters.get(row["lang"], 0) + 1
            rid = f"{row['lang']}-{counters[row['lang']]:03d}"
            split = "test" if hashlib.sha256(rid.encode()).digest()[0] % 2 == 0 else "tune"
            rec = {"id": rid, **{k_: v for k_, v in row.items() if v is not None},
                   "stated_tokens": round(stated_tokens(row), 2), "split": split}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(f"{len(rows)} rows -> {out}: " + ", ".join(f"{k_} {v}" for k_, v in sorted(counters.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
