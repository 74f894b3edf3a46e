"""The benchmark's sentences: three everyday sentences per catalogue language.

Every quality figure that speaks text (TTS round-trip word error rate, naturalness, the
transcription set's synthetic part) speaks these, so figures stay comparable across runs.
They are general text, not tuned to any voice: a voice is judged on what users say. They
hold no numbers: Whisper writes "20" for "veinte", which WER would count as a wrong word.
Japanese says the same three things (measured by the readings' characters, `bench.wer`).
"""

from __future__ import annotations

SENTENCES: dict[str, tuple[str, ...]] = {
    "en": (
        "Please send the quarterly report to the finance team before Friday.",
        "The train to the airport leaves from the platform beside the old station.",
        "My neighbour grows tomatoes and beans in a small garden behind the house.",
    ),
    "es": (
        "Por favor, envíe el informe trimestral al equipo de finanzas antes del viernes.",
        "El tren al aeropuerto sale del andén que está junto a la estación vieja.",
        "Mi vecina cultiva tomates y judías en un pequeño jardín detrás de la casa.",
    ),
    "fr": (
        "Merci d'envoyer le rapport trimestriel à l'équipe financière avant vendredi.",
        "Le train pour l'aéroport part du quai situé à côté de la vieille gare.",
        "Ma voisine cultive des tomates et des haricots dans un petit jardin derrière la maison.",
    ),
    "it": (
        "Per favore, invia il rapporto trimestrale al gruppo finanziario prima di venerdì.",
        "Il treno per l'aeroporto parte dal binario accanto alla vecchia stazione.",
        "La mia vicina coltiva pomodori e fagioli in un piccolo giardino dietro la casa.",
    ),
    "pt": (
        "Por favor, envie o relatório trimestral para a equipe financeira antes de sexta-feira.",
        "O trem para o aeroporto sai da plataforma ao lado da estação antiga.",
        "Minha vizinha cultiva tomates e feijões em um pequeno jardim atrás da casa.",
    ),
    "de": (
        "Bitte schicken Sie den Quartalsbericht vor Freitag an die Finanzabteilung.",
        "Der Zug zum Flughafen fährt vom Bahnsteig neben dem alten Bahnhof ab.",
        "Meine Nachbarin baut Tomaten und Bohnen in einem kleinen Garten hinter dem Haus an.",
    ),
    "ja": (
        "金曜日までに四半期の報告書を経理部に送ってください。",
        "空港行きの電車は古い駅の隣のホームから出ます。",
        "隣の人は家の裏の小さな庭でトマトと豆を育てています。",
    ),
}
