"""Words for a program's usual parts that share no letters with their English names.

`resolve` finds the workspace's names in a request's own words, cognates and katakana; a
translation ("el analizador", "解析器", "Zwischenspeicher") or an English synonym ("the
grammar code", "the tokenizer" for a lexer) shares nothing a rule could read. This table holds
those words for the parts most programs name their files after (parser, lexer, cache, config,
log, database, ...), in German, French, Spanish, Japanese (kanji: katakana has its own rule)
and Chinese, with the English names they stand for. `resolve` looks a term up only where its
own rules found no name, under the same conditions as any other word (after a determiner, a
capitalized noun, or in a request in kana or ideographs), and an English synonym only as a
component: "the grammar code", "the tokenizer", never "fix the grammar in the README".

What the table does not hold, it cannot find: a part named otherwise (a project's own words),
other languages, or a term with a second everyday sense in its language. It is data, not
learning: a term is added where its sense in a request is the part of a program and nothing
else.
"""

from __future__ import annotations

import re

from ..text import fold

# English names (file stems, directory names) | terms in de, fr, es, ja and zh (plurals where
# they differ by more than a final -s or -es) | English synonyms. Terms spelled as their
# English name, or found by resolve's rules (parseur, servidor, Konfiguration, katakana), are
# not listed.
_TABLE = """
parser parse parsing parsers | Syntaxanalysator, Zerteiler, analyseur, analyseur syntaxique,\
 analizador, analizador sintáctico, 構文解析器, 構文解析, 解析器, 语法分析器, 解析程序,\
 剖析器 | grammar
lexer lex lexing tokenizer tokeniser tokenize scanner | lexikalischer Scanner, Tokenisierer,\
 analyseur lexical, analizador léxico, tokenizador, 字句解析器, 字句解析, 词法分析器, 词法分析,\
 分词器 | tokenizer, tokeniser, tokenising, tokenizing, tokenization, scanner
cache caching caches | Zwischenspeicher, 缓存, 快取, 緩存 |
config configuration configs settings conf | Einstellungen, paramètres, réglages, ajustes,\
 設定, 配置, 配置文件, 设置 | settings, configuration
log logs logger logging | Protokollierung, journalisation, registro, bitácora, 日志,\
 日志记录, 日誌 | logger, logging
database db databases | Datenbank, base de données, base de datos, 数据库, 資料庫 |
auth authentication login | Anmeldung, inicio de sesión, 認証, 认证, 身份验证, 登录 |
tests test testing | Testfälle, pruebas, 测试, 単体テスト |
docs doc documentation | 文書, 文档, 説明書 |
utils util utilities helpers | Hilfsfunktionen, utilitaires, utilidades, 工具函数,\
 ユーティリティ | helpers, utilities
client | cliente, 客户端, 用戶端 |
server | 服务器, 服务端, 伺服器 |
router routes routing | enrutador, 路由器, 路由 |
scheduler | Zeitplaner, planificateur, ordonnanceur, planificador, 调度器, 调度程序 |
queue queues | Warteschlange, file d'attente, cola de mensajes, 队列, 待ち行列 |
compiler | Übersetzer, 编译器, 翻訳器 |
interpreter | intérprete, 解释器 |
templates template | Vorlagen, gabarits, plantillas, 模板, テンプレート |
models model | Modelle, modèles, modelos, 模型 |
views view | Ansichten, vues, vistas, 视图 |
handlers handler | gestionnaire, manejador, 处理器, 处理程序 |
middleware | 中间件 |
migrations migration | migraciones, 迁移, 数据迁移 |
plugins plugin extensions | Erweiterungen, complementos, 插件, 拡張機能 |
storage store | Speicher, stockage, almacenamiento, 存储 |
validator validators validation | Prüfer, 校验器, 验证器, 検証 |
serializer serializers serialization | Serialisierer, 序列化器, 序列化 |
formatter | Formatierer, 格式化器, 格式化工具 |
cli | Kommandozeile, Befehlszeile, ligne de commande, línea de comandos, 命令行 |
crawler scraper spider | rastreador, 爬虫 |
errors error exceptions | Ausnahmen, erreurs, errores, excepciones, 异常, 例外 |
report reports reporting | Bericht, rapport, informe, reporte, 报告, 報告書 |
mail email | courriel, correo, 邮件 |
payments payment billing | Zahlungen, paiement, pagos, 支付, 決済 |
users user accounts | Benutzer, utilisateurs, usuarios, 用户, 用戶 |
search | Suche, recherche, búsqueda, 搜索, 検索 |
notifications notify | Benachrichtigungen, 通知 |
events event | Ereignisse, événements, eventos, 事件 |
permissions | Berechtigungen, permisos, 权限, 権限 |
session sessions | Sitzung, sesión, 会话 |
"""

# A word after an English synonym that makes it a part of the program ("the grammar code").
COMPONENTS = frozenset(
    "code module modules file files layer logic class classes package step part component "
    "rules implementation".split()
)
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_SPACES = re.compile(r"\s+")


def key(text: str) -> str:
    """How a term is looked up: folded (no case, no accents: parametres for paramètres), one
    space between words, one apostrophe."""
    return _SPACES.sub(" ", fold(text)).replace("\u2019", "'")


def _table() -> tuple[dict[str, tuple[str, ...]], frozenset[str]]:
    """Each term's key -> the English names it stands for; and the English terms' keys."""
    names: dict[str, tuple[str, ...]] = {}
    english: set[str] = set()
    for row in _TABLE.strip().splitlines():
        heads, terms, synonyms = (part.strip() for part in row.split("|"))
        stands_for = tuple(heads.split())
        for term in (t.strip() for t in terms.split(",") if t.strip()):
            names[key(term)] = stands_for
        for term in (t.strip() for t in synonyms.split(",") if t.strip()):
            names[key(term)] = tuple(n for n in stands_for if n != term)
            english.add(key(term))
    return names, frozenset(english)


_NAMES, ENGLISH = _table()
# The longest term: in words (a script with spaces), in characters (kanji and hanzi); and
# what a term can begin with, so that most words and characters cost one set lookup.
MOST_WORDS = max(len(k.replace("'", " ").split()) for k in _NAMES if not _CJK.search(k))
MOST_CJK = max(len(k) for k in _NAMES if _CJK.search(k))
FIRST = frozenset(k[0] if _CJK.search(k) else k.replace("'", " ").split()[0] for k in _NAMES)
# and as written (テンプレート's key has no handakuten: its first character may be another)
FIRST |= frozenset(t.strip()[0] for t in re.split(r"[,|\n]", _TABLE) if _CJK.match(t.strip()))


def may_begin(word: str) -> bool:
    """Whether a term may begin with `word` (a key, or a plural of one) or, in kanji and
    hanzi, with its first character."""
    return word in FIRST or word[:-1] in FIRST or word[:-2] in FIRST


def lookup(term_key: str) -> tuple[str, tuple[str, ...]] | None:
    """The table's term for a key (itself or its singular: -s, -es) and the English names it
    stands for; None when the table does not hold it."""
    for k in (term_key, term_key[:-1], term_key[:-2]):
        if k in _NAMES and (k == term_key or term_key[len(k) :] in ("s", "es")):
            return k, _NAMES[k]
    return None
