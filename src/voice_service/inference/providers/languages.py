"""Language names and codes as providers write them, turned into the ISO 639-1 codes the
API uses: OpenAI's verbose_json says "english", faster-whisper servers "en", ElevenLabs
"eng" (ISO 639-3), some "en-US" or "English"."""

from __future__ import annotations

# Whisper's languages (the ones a provider of any kind may name): ISO 639-1, the name
# Whisper gives it, then its ISO 639-3 code and any ISO 639-2/B synonym.
_TABLE = """
en english eng|zh chinese zho chi cmn|de german deu ger|es spanish spa|ru russian rus
ko korean kor|fr french fra fre|ja japanese jpn|pt portuguese por|tr turkish tur
pl polish pol|ca catalan cat|nl dutch nld dut|ar arabic ara|sv swedish swe|it italian ita
id indonesian ind|hi hindi hin|fi finnish fin|vi vietnamese vie|he hebrew heb|uk ukrainian ukr
el greek ell gre|ms malay msa may zsm|cs czech ces cze|ro romanian ron rum|da danish dan
hu hungarian hun|ta tamil tam|no norwegian nor nob|th thai tha|ur urdu urd|hr croatian hrv
bg bulgarian bul|lt lithuanian lit|la latin lat|mi maori mri mao|ml malayalam mal
cy welsh cym wel|sk slovak slk slo|te telugu tel|fa persian fas per|lv latvian lav
bn bengali ben|sr serbian srp|az azerbaijani aze|sl slovenian slv|kn kannada kan
et estonian est|mk macedonian mkd mac|br breton bre|eu basque eus baq|is icelandic isl ice
hy armenian hye arm|ne nepali nep|mn mongolian mon|bs bosnian bos|kk kazakh kaz
sq albanian sqi alb|sw swahili swa|gl galician glg|mr marathi mar|pa punjabi pan
si sinhala sin|km khmer khm|sn shona sna|yo yoruba yor|so somali som|af afrikaans afr
oc occitan oci|ka georgian kat geo|be belarusian bel|tg tajik tgk|sd sindhi snd
gu gujarati guj|am amharic amh|yi yiddish yid|lo lao lao|uz uzbek uzb|fo faroese fao
ht haitian_creole hat|ps pashto pus|tk turkmen tuk|nn nynorsk nno|mt maltese mlt
sa sanskrit san|lb luxembourgish ltz|my myanmar mya bur burmese|bo tibetan bod tib
tl tagalog tgl fil filipino|mg malagasy mlg|as assamese asm|tt tatar tat|ln lingala lin
ha hausa hau|ba bashkir bak|jv javanese jav jw|su sundanese sun
"""

_CODES: dict[str, str] = {}
for _entry in _TABLE.replace("\n", "|").split("|"):
    if _entry.strip():
        _code, *_aliases = _entry.split()
        _CODES[_code] = _code
        for _alias in _aliases:
            _CODES[_alias.replace("_", " ")] = _code

# Every language a provider with languages = ["*"] accepts as a hint.
WHISPER_LANGUAGES = frozenset(_CODES.values())


def to_iso_639_1(value: str) -> str | None:
    """The ISO 639-1 code of a language as a provider wrote it, or None if unknown."""
    text = value.strip().lower().replace("_", " ")
    code = _CODES.get(text) or _CODES.get(text.split("-")[0])
    return code
