"""Text normalization (vocalis.text.normalize): tables of readings written from each
language's rules (not produced by the code), idempotence, no dropped words, pass-through,
bad input; the API, CLI and server paths."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vocalis.errors import InputError
from vocalis.text.normalize import normalize, resolve_language, supports

EN = [
    # thousands and decimals: English separators
    ("I have 1,000 apples.", "I have one thousand apples."),
    ("It weighs 1.000 grams.", "It weighs one point zero zero zero grams."),
    ("About 1,234,567 people.", ("About one million two hundred and thirty-four thousand five hundred and "
                                 "sixty-seven people.")),
    ("Pi is 3.14.", "Pi is three point one four."),
    ("I have 2 cats and 3 dogs.", "I have two cats and three dogs."),
    ("It has 123 pages.", "It has one hundred and twenty-three pages."),
    ("Agent 007 is here.", "Agent zero zero seven is here."),
    # titles and abbreviations
    ("Dr. Smith is here.", "Doctor Smith is here."),
    ("He lives on Oak Dr. now.", "He lives on Oak Drive now."),
    ("St. Patrick came.", "Saint Patrick came."),
    ("I live on Main St.", "I live on Main Street."),
    ("Mr. Jones met Mrs. Smith.", "Mister Jones met Missus Smith."),
    ("Prof. Lee spoke.", "Professor Lee spoke."),
    ("Apples, pears, etc. are fruit.", "Apples, pears, et cetera are fruit."),
    ("Bring food, e.g. bread.", "Bring food, for example bread."),
    ("It is No. 7.", "It is number seven."),
    # fractions vs dates
    ("Add 3/4 cup of flour.", "Add three quarters cup of flour."),
    ("The shop opened on 3/4.", "The shop opened on March fourth."),
    ("Mix 1/2 cup.", "Mix one half cup."),
    ("Take 2/3 of it.", "Take two thirds of it."),
    ("Use 5/8 of the rope.", "Use five eighths of the rope."),
    # money
    ("Revenue was $1.2M.", "Revenue was one point two million dollars."),
    ("They raised $5 billion.", "They raised five billion dollars."),
    ("It costs $3.50.", "It costs three dollars and fifty cents."),
    ("It costs $1.", "It costs one dollar."),
    ("Only $0.99 today.", "Only ninety-nine cents today."),
    ("Pay €20 now.", "Pay twenty euros now."),
    ("That is £5.", "That is five pounds."),
    # units
    ("Drive at 10km/h.", "Drive at ten kilometers per hour."),
    ("He ran 5 km.", "He ran five kilometers."),
    ("It weighs 1 kg.", "It weighs one kilogram."),
    ("Go 60 mph.", "Go sixty miles per hour."),
    ("Use 500 ml.", "Use five hundred milliliters."),
    ("It is 70 °F.", "It is seventy degrees Fahrenheit."),
    ("It needs 16 GB.", "It needs sixteen gigabytes."),
    # ordinals
    ("She finished 2nd.", "She finished second."),
    ("The 21st century.", "The twenty-first century."),
    ("He was 3rd.", "He was third."),
    ("It is the 4th of July.", "It is the fourth of July."),
    # versions
    ("Install version 2.0.1 today.", "Install version two point zero point one today."),
    ("Get v2.1 now.", "Get version two point one now."),
    # times
    ("Meet me at 9:30 a.m. tomorrow.", "Meet me at nine thirty AM tomorrow."),
    ("See you at 14:05.", "See you at fourteen oh five."),
    ("It starts at 9:00.", "It starts at nine o'clock."),
    ("Lunch at 12:30 p.m. sharp.", "Lunch at twelve thirty PM sharp."),
    ("Wake at 7 am.", "Wake at seven AM."),
    # years vs cardinals
    ("In 1999 we moved.", "In nineteen ninety-nine we moved."),
    ("We sold 1999 cars.", "We sold one thousand nine hundred and ninety-nine cars."),
    ("Since 2010 it grew.", "Since twenty ten it grew."),
    ("In 2005 we met.", "In two thousand and five we met."),
    ("In 1905 it began.", "In nineteen oh five it began."),
    ("The 1990s were loud.", "The nineteen nineties were loud."),
    ("From 2020-2024 it rained.", "From twenty twenty to twenty twenty-four it rained."),
    # dates
    ("It happened on 12/25/2026.", "It happened on December twenty-fifth twenty twenty-six."),
    ("Due 2026-05-12.", "Due May twelfth twenty twenty-six."),
    ("Born May 5, 1990.", "Born May fifth, nineteen ninety."),
    # percentages, negatives, ranges
    ("Sales grew 50%.", "Sales grew fifty percent."),
    ("Rates fell 3.5% this year.", "Rates fell three point five percent this year."),
    ("Score 100%.", "Score one hundred percent."),
    ("It was -5 degrees.", "It was minus five degrees."),
    ("It was -5 °C outside.", "It was minus five degrees Celsius outside."),
    ("Temperatures of -10 are rare.", "Temperatures of minus ten are rare."),
    ("Read pages 10-20.", "Read pages ten to twenty."),
    # phone numbers, emails, URLs
    ("Call 555-123-4567 today.", "Call five five five, one two three, four five six seven today."),
    ("Call me at 555-1234.", "Call me at five five five, one two three four."),
    ("The score was 3-2.", "The score was three to two."),
    ("Call (555) 123-4567 now.", "Call five five five, one two three, four five six seven now."),
    ("Call +1 555 123 4567 now.", "Call plus one, five five five, one two three, four five six seven now."),
    ("Email jane.doe@example.com please.", "Email jane dot doe at example dot com please."),
    ("Visit https://example.com/docs now.", "Visit example dot com slash docs now."),
    # Roman numerals
    ("Henry VIII had six wives.", "Henry the Eighth had six wives."),
    ("Louis XIV ruled.", "Louis the Fourteenth ruled."),
    ("World War II ended.", "World War two ended."),
    ("Read Chapter IV first.", "Read Chapter four first."),
    # written pairs that are not fractions, feet and inches, emergency numbers
    ("It runs 24/7.", "It runs twenty-four seven."),
    ("He is 5'11\" tall.", "He is five foot eleven tall."),
    ("She is 5\u20194\u201d tall.", "She is five foot four tall."),
    ("He is 6'0\".", "He is six feet."),
    ("Please call 911 now.", "Please call nine one one now."),
    ("Dial 999 for help.", "Dial nine nine nine for help."),
    ("In Europe, call 112.", "In Europe, call one one two."),
    ("We sold 999 cars.", "We sold nine hundred and ninety-nine cars."),
    # a unit's abbreviation dot inside a sentence is read with it; at a sentence's end it stays
    ("Wait 5 min. then go.", "Wait five minutes then go."),
    ("Wait 10 sec. then go.", "Wait ten seconds then go."),
    ("Wait 5 min., then go.", "Wait five minutes, then go."),
    ("Wait 5 min. Then go.", "Wait five minutes. Then go."),
    ("It took 10 sec.", "It took ten seconds."),
    # signs, ranges, quarters, pages, numbers, abbreviations
    ("It rose +5 today.", "It rose plus five today."),
    ("It is +5 °C.", "It is plus five degrees Celsius."),
    ("Pick 3..5 items.", "Pick three to five items."),
    ("Results for Q3 2025 are out.", "Results for Q three twenty twenty-five are out."),
    ("Sales rose in Q4.", "Sales rose in Q four."),
    ("See p. 5 for details.", "See page five for details."),
    ("Read pp. 10-12.", "Read pages ten to twelve."),
    ("He lives at no. 5.", "He lives at number five."),
    ("No. 5 is here.", "Number five is here."),
    ("It is approx. 5 km.", "It is approximately five kilometers."),
    ("It costs $5 incl. tax.", "It costs five dollars including tax."),
    ("Read Vol. IV now.", "Read Volume four now."),
    ("See ch. 5 first.", "See chapter five first."),
    ("The flat is 80 m².", "The flat is eighty square meters."),
    ("It holds 1 m³.", "It holds one cubic meter."),
    # the example
    ("Dr. Smith paid $3.50 on 12/05 at 9:30 a.m.",
     "Doctor Smith paid three dollars and fifty cents on December fifth at nine thirty AM."),
]

FR = [
    ("J'ai 1.000 euros.", "J'ai mille euros."),
    ("Il a 1 000 amis.", "Il a mille amis."),
    ("La valeur est 1,000.", "La valeur est un virgule zéro zéro zéro."),
    ("Pi vaut 3,14.", "Pi vaut trois virgule quatorze."),
    ("Il fait 2,5 degrés.", "Il fait deux virgule cinq degrés."),
    ("Il gagne 1 000 000 euros.", "Il gagne un million euros."),
    ("Il a 21 ans.", "Il a vingt et un ans."),
    ("Il a 80 ans.", "Il a quatre-vingts ans."),
    ("Il y a 71 élèves.", "Il y a soixante et onze élèves."),
    ("Il y a 99 ballons.", "Il y a quatre-vingt-dix-neuf ballons."),
    ("Nous sommes 200.", "Nous sommes deux cents."),
    ("Il a 17 ans.", "Il a dix-sept ans."),
    ("Le Dr Martin arrive.", "Le Docteur Martin arrive."),
    ("M. Dupont est là.", "Monsieur Dupont est là."),
    ("Mme Durand est là.", "Madame Durand est là."),
    ("Mlle Roux chante.", "Mademoiselle Roux chante."),
    ("Il habite à St-Denis.", "Il habite à Saint-Denis."),
    ("Ste Marie prie.", "Sainte Marie prie."),
    ("Pommes, poires, etc.", "Pommes, poires, et cetera."),
    ("Il habite au n° 5.", "Il habite au numéro cinq."),
    ("Elle habite 3 av. Foch.", "Elle habite trois avenue Foch."),
    ("Ajoutez 3/4 de tasse.", "Ajoutez trois quarts de tasse."),
    ("Rendez-vous le 3/4.", "Rendez-vous le trois avril."),
    ("Il boit 1/2 litre.", "Il boit un demi litre."),
    ("Prenez 2/3 du gâteau.", "Prenez deux tiers du gâteau."),
    ("Il roule à 10km/h.", "Il roule à dix kilomètres par heure."),
    ("Il pèse 70 kg.", "Il pèse soixante-dix kilogrammes."),
    ("Il mesure 1 m.", "Il mesure un mètre."),
    ("Versez 500 ml.", "Versez cinq cents millilitres."),
    ("Courez 5 km.", "Courez cinq kilomètres."),
    ("Il a attendu 30 min.", "Il a attendu trente minutes."),
    ("Attendez 5 min. puis partez.", "Attendez cinq minutes puis partez."),
    ("L'appartement fait 80 m².", "L'appartement fait quatre-vingts mètres carrés."),
    ("Il faut 1 m³.", "Il faut un mètre cube."),
    ("Il est arrivé 2e.", "Il est arrivé deuxième."),
    ("Elle est 1re.", "Elle est première."),
    ("Le 1er janvier.", "Le premier janvier."),
    ("Le 21e siècle.", "Le vingt et unième siècle."),
    ("C'est le 2nd.", "C'est le second."),
    ("La version 2.0.1 est sortie.", "La version deux point zéro point un est sortie."),
    ("Il est 14h30.", "Il est quatorze heures trente."),
    ("Il est 9h.", "Il est neuf heures."),
    ("Il est 1h.", "Il est une heure."),
    ("À 21h15.", "À vingt et une heures quinze."),
    ("Rendez-vous à 8:05.", "Rendez-vous à huit heures cinq."),
    ("Il est 7 heures.", "Il est sept heures."),
    ("En 1789 tout change.", "En mille sept cent quatre-vingt-neuf tout change."),
    ("Il est né en 2001.", "Il est né en deux mille un."),
    ("Le 12/05/2026.", "Le douze mai deux mille vingt-six."),
    ("Le 14 juillet 1789.", "Le quatorze juillet mille sept cent quatre-vingt-neuf."),
    ("Ça coûte 3,50 €.", "Ça coûte trois euros cinquante."),
    ("Ça coûte 20 €.", "Ça coûte vingt euros."),
    ("Ça coûte 1 €.", "Ça coûte un euro."),
    ("Ça coûte 5 $.", "Ça coûte cinq dollars."),
    ("Ça coûte 0,50 €.", "Ça coûte cinquante centimes."),
    ("Une dette de -20 €.", "Une dette de moins vingt euros."),
    ("Il a gagné 1,2 million d'euros.", "Il a gagné un virgule deux million d'euros."),
    ("Une hausse de 50 %.", "Une hausse de cinquante pour cent."),
    ("Une baisse de 2,5 %.", "Une baisse de deux virgule cinq pour cent."),
    ("Il fait -5 °C.", "Il fait moins cinq degrés Celsius."),
    ("Il fait -3 degrés.", "Il fait moins trois degrés."),
    ("Lisez les pages 10-20.", "Lisez les pages dix à vingt."),
    ("Appelez le 01 23 45 67 89.",
     "Appelez le zéro un, vingt-trois, quarante-cinq, soixante-sept, quatre-vingt-neuf."),
    ("Écrivez à marie@exemple.fr.", "Écrivez à marie arobase exemple point fr."),
    ("Voir www.exemple.fr/aide.", "Voir www point exemple point fr slash aide."),
    ("Louis XIV régnait.", "Louis quatorze régnait."),
    ("François Ier régnait.", "François premier régnait."),
    ("Le XIXe siècle.", "Le dix-neuvième siècle."),
    ("Lisez le chapitre III.", "Lisez le chapitre trois."),
]

DE = [
    ("Ich habe 1.000 Euro.", "Ich habe eintausend Euro."),
    ("Der Wert ist 1,000.", "Der Wert ist eins Komma null null null."),
    ("Pi ist 3,14.", "Pi ist drei Komma eins vier."),
    ("Es gab 1.000.000 Besucher.", "Es gab eine Million Besucher."),
    ("Das war 2,5 mal so viel.", "Das war zwei Komma fünf mal so viel."),
    ("Er hat 21 Katzen.", "Er hat einundzwanzig Katzen."),
    ("Es sind 35 Gäste.", "Es sind fünfunddreißig Gäste."),
    ("Es sind 101 Gäste.", "Es sind einhunderteins Gäste."),
    ("Er ist 25 Jahre alt.", "Er ist fünfundzwanzig Jahre alt."),
    ("Er hat 3.", "Er hat drei."),
    ("Dr. Müller kommt.", "Doktor Müller kommt."),
    ("Prof. Weber liest.", "Professor Weber liest."),
    ("Fr. Schmidt ist da.", "Frau Schmidt ist da."),
    ("Hr. Meier ist da.", "Herr Meier ist da."),
    ("Er wohnt in St. Gallen.", "Er wohnt in Sankt Gallen."),
    ("Er wohnt in der Hauptstr. 5.", "Er wohnt in der Hauptstraße fünf."),
    ("Das ist z. B. gut.", "Das ist zum Beispiel gut."),
    ("Das ist z.B. gut.", "Das ist zum Beispiel gut."),
    ("Äpfel, Birnen usw.", "Äpfel, Birnen und so weiter."),
    ("Er kommt bzw. sie.", "Er kommt beziehungsweise sie."),
    ("Es dauert ca. 5 min.", "Es dauert circa fünf Minuten."),
    ("Warte 5 min. und geh.", "Warte fünf Minuten und geh."),
    ("Siehe S. 5 unten.", "Siehe Seite fünf unten."),
    # years outside "im Jahr": before or after a year word, after seit/bis/von/um..., a lifespan
    ("Goethe wurde 1749 geboren.", "Goethe wurde siebzehnhundertneunundvierzig geboren."),
    ("1749 geboren, 1832 gestorben.", "siebzehnhundertneunundvierzig geboren, achtzehnhundertzweiunddreißig gestorben."),
    ("Er wurde 1749 in Frankfurt geboren.", "Er wurde siebzehnhundertneunundvierzig in Frankfurt geboren."),
    ("Er starb 1832 in Weimar.", "Er starb achtzehnhundertzweiunddreißig in Weimar."),
    ("Von 1749 bis 1832 lebte er.", "Von siebzehnhundertneunundvierzig bis achtzehnhundertzweiunddreißig lebte er."),
    ("Um 1800 war das anders.", "Um achtzehnhundert war das anders."),
    ("Goethe (1749–1832) war Dichter.",
     "Goethe (siebzehnhundertneunundvierzig bis achtzehnhundertzweiunddreißig) war Dichter."),
    # ... but a number before a noun or a currency stays a cardinal
    ("Es kostet 1749 Euro.", "Es kostet eintausendsiebenhundertneunundvierzig Euro."),
    ("Es kamen 1749 Menschen.", "Es kamen eintausendsiebenhundertneunundvierzig Menschen."),
    ("Bis 1999 Autos.", "Bis eintausendneunhundertneunundneunzig Autos."),
    # one before a feminine noun: eine
    ("Ich sehe 1 Person.", "Ich sehe eine Person."),
    ("Es dauert 1 Stunde.", "Es dauert eine Stunde."),
    ("Das ist 1 Zeitung.", "Das ist eine Zeitung."),
    ("Das ist 1 Tag.", "Das ist ein Tag."),
    ("Es wiegt 1 Tonne.", "Es wiegt eine Tonne."),
    # square and cubic units
    ("Die Wohnung hat 80 m².", "Die Wohnung hat achtzig Quadratmeter."),
    ("Der See misst 5 km².", "Der See misst fünf Quadratkilometer."),
    ("Es sind 3 m³ Wasser.", "Es sind drei Kubikmeter Wasser."),
    ("Er ist d. h. krank.", "Er ist das heißt krank."),
    ("Er wohnt in Nr. 5.", "Er wohnt in Nummer fünf."),
    ("Nehmen Sie 3/4 Liter.", "Nehmen Sie drei Viertel Liter."),
    ("Das sind 2/3.", "Das sind zwei Drittel."),
    ("Das sind 5/8.", "Das sind fünf Achtel."),
    ("Er fährt 10km/h.", "Er fährt zehn Kilometer pro Stunde."),
    ("Sie wiegt 70 kg.", "Sie wiegt siebzig Kilogramm."),
    ("Er ist 1 m groß.", "Er ist ein Meter groß."),
    ("Gießen Sie 500 ml ein.", "Gießen Sie fünfhundert Milliliter ein."),
    ("Er lief 5 km.", "Er lief fünf Kilometer."),
    ("Am 3. Mai kommt er.", "Am dritten Mai kommt er."),
    ("Der 2. Weltkrieg endete.", "Der zweite Weltkrieg endete."),
    ("Das ist der 3. Versuch.", "Das ist der dritte Versuch."),
    ("Im 20. Jahrhundert.", "Im zwanzigsten Jahrhundert."),
    ("Heute ist der 1. Mai.", "Heute ist der erste Mai."),
    ("Er wurde am 12.05.2026 geboren.", "Er wurde am zwölften Mai zweitausendsechsundzwanzig geboren."),
    ("Am 24.12. ist Heiligabend.", "Am vierundzwanzigsten Dezember ist Heiligabend."),
    ("Bis zum 3.10.", "Bis zum dritten Oktober."),
    ("Version 2.0.1 ist da.", "Version zwei Punkt null Punkt eins ist da."),
    ("Es ist 14:30 Uhr.", "Es ist vierzehn Uhr dreißig."),
    ("Um 7.30 Uhr.", "Um sieben Uhr dreißig."),
    ("Um 9 Uhr.", "Um neun Uhr."),
    ("Um 1 Uhr.", "Um ein Uhr."),
    ("Um 18:00 Uhr.", "Um achtzehn Uhr."),
    ("Im Jahr 1999 fiel Schnee.", "Im Jahr neunzehnhundertneunundneunzig fiel Schnee."),
    ("Es gab 1999 Autos.", "Es gab eintausendneunhundertneunundneunzig Autos."),
    ("Seit 2010 lebt er hier.", "Seit zweitausendzehn lebt er hier."),
    ("Von 1990-1999 war er hier.", "Von neunzehnhundertneunzig bis neunzehnhundertneunundneunzig war er hier."),
    ("Das kostet 3,50 €.", "Das kostet drei Euro fünfzig."),
    ("Das kostet 1 €.", "Das kostet ein Euro."),
    ("Das kostet 20 $.", "Das kostet zwanzig Dollar."),
    ("Das kostet 0,99 €.", "Das kostet neunundneunzig Cent."),
    ("Die Inflation lag bei 5,5 %.", "Die Inflation lag bei fünf Komma fünf Prozent."),
    ("Ein Plus von 10 %.", "Ein Plus von zehn Prozent."),
    ("Ein Minus von -2 %.", "Ein Minus von minus zwei Prozent."),
    ("Es waren -5 °C.", "Es waren minus fünf Grad Celsius."),
    ("Es waren -3 Grad.", "Es waren minus drei Grad."),
    ("Lesen Sie Seiten 10-20.", "Lesen Sie Seiten zehn bis zwanzig."),
    ("Rufen Sie 030 1234567 an.", "Rufen Sie null drei null, eins zwei drei vier fünf sechs sieben an."),
    ("Rufen Sie +49 30 1234567 an.",
     "Rufen Sie plus vier neun, drei null, eins zwei drei vier fünf sechs sieben an."),
    ("Schreiben Sie an max@beispiel.de.", "Schreiben Sie an max at beispiel Punkt de."),
    ("Ludwig XIV. war König.", "Ludwig der Vierzehnte war König."),
    ("Heinrich VIII. hatte sechs Frauen.", "Heinrich der Achte hatte sechs Frauen."),
    ("Lesen Sie Kapitel IV.", "Lesen Sie Kapitel vier."),
]

# Spanish: decimal comma, thousands dot; dates day "de" month "de" year; 1.º de mayo = primero
ES = [
    ("Tengo 1.000 euros.", "Tengo mil euros."),
    ("Pesa 3,5 kilos.", "Pesa tres coma cinco kilos."),
    ("El valor es 1,000.", "El valor es uno coma cero cero cero."),
    ("Pi vale 3,14.", "Pi vale tres coma catorce."),
    ("Son 1.000.000 de personas.", "Son un millón de personas."),
    ("Tiene 25 años.", "Tiene veinticinco años."),
    ("Hay 16 sillas.", "Hay dieciséis sillas."),
    ("Hay 100 libros.", "Hay cien libros."),
    ("Cuesta 2.500 pesos.", "Cuesta dos mil quinientos pesos."),
    ("Llegaron 999 atletas.", "Llegaron novecientos noventa y nueve atletas."),
    ("Hay 47 casos.", "Hay cuarenta y siete casos."),
    ("El Sr. García llegó.", "El Señor García llegó."),
    ("La Sra. López habla.", "La Señora López habla."),
    ("La Srta. Ruiz canta.", "La Señorita Ruiz canta."),
    ("El Dr. Pérez opera.", "El Doctor Pérez opera."),
    ("La Dra. Gómez opera.", "La Doctora Gómez opera."),
    ("Manzanas, peras, etc.", "Manzanas, peras, etcétera."),
    ("Traiga fruta, p. ej. manzanas.", "Traiga fruta, por ejemplo manzanas."),
    ("Vive en la Av. Libertad.", "Vive en la Avenida Libertad."),
    ("Vive en el n.º 5.", "Vive en el número cinco."),
    ("Añada 3/4 de taza.", "Añada tres cuartos de taza."),
    ("Nos vemos el 3/4.", "Nos vemos el tres de abril."),
    ("Coma 1/3 del pastel.", "Coma un tercio del pastel."),
    ("Tome 2/3 del total.", "Tome dos tercios del total."),
    ("Va a 10km/h.", "Va a diez kilómetros por hora."),
    ("Pesa 70 kg.", "Pesa setenta kilogramos."),
    ("Mide 1 m.", "Mide un metro."),
    ("Añada 500 ml.", "Añada quinientos mililitros."),
    ("Corrió 21 km.", "Corrió veintiún kilómetros."),
    ("Esperó 30 min.", "Esperó treinta minutos."),
    ("Pesa 1,5 kg.", "Pesa uno coma cinco kilogramos."),
    ("Llegó 2º.", "Llegó segundo."),
    ("Ella quedó 1ª.", "Ella quedó primera."),
    ("Es el 3er piso.", "Es el tercer piso."),
    ("Vive en el 5.º piso.", "Vive en el quinto piso."),
    ("La versión 2.0.1 salió.", "La versión dos punto cero punto uno salió."),
    ("Son las 14:30.", "Son las catorce y treinta."),
    ("Llega a las 9:05.", "Llega a las nueve y cinco."),
    ("Es la 1:15.", "Es la una y quince."),
    ("Abre a las 21h.", "Abre a las veintiuna horas."),
    ("Cierra a las 20:00.", "Cierra a las veinte horas."),
    ("En 1492 llegó Colón.", "En mil cuatrocientos noventa y dos llegó Colón."),
    ("Nació en 2001.", "Nació en dos mil uno."),
    ("El 12/05/2026.", "El doce de mayo de dos mil veintiséis."),
    ("El 21 de mayo.", "El veintiuno de mayo."),
    ("El 1 de enero de 2000.", "El uno de enero de dos mil."),
    ("El 1.º de mayo.", "El primero de mayo."),
    ("El 2026-03-15.", "El quince de marzo de dos mil veintiséis."),
    ("Cuesta 3,50 €.", "Cuesta tres euros con cincuenta céntimos."),
    ("Cuesta 20 €.", "Cuesta veinte euros."),
    ("Cuesta 1 €.", "Cuesta un euro."),
    ("Cuesta 21 €.", "Cuesta veintiún euros."),
    ("Cuesta 0,50 €.", "Cuesta cincuenta céntimos."),
    ("Cuesta 25.000 €.", "Cuesta veinticinco mil euros."),
    ("Pagó 5 $.", "Pagó cinco dólares."),
    ("Cuesta 200 £.", "Cuesta doscientas libras."),
    ("Debe -20 €.", "Debe menos veinte euros."),
    ("Ganó 1,2 M€.", "Ganó uno coma dos millones de euros."),
    ("Subió un 50 %.", "Subió un cincuenta por ciento."),
    ("Bajó un 2,5 %.", "Bajó un dos coma cinco por ciento."),
    ("Hace -5 °C.", "Hace menos cinco grados Celsius."),
    ("Hay -3 grados.", "Hay menos tres grados."),
    ("Lea las páginas 10-20.", "Lea las páginas diez a veinte."),
    ("Llame al 612 345 678.", "Llame al seis uno dos, tres cuatro cinco, seis siete ocho."),
    ("Escriba a ana@ejemplo.es.", "Escriba a ana arroba ejemplo punto es."),
    ("Vea www.ejemplo.es/ayuda.", "Vea www punto ejemplo punto es barra ayuda."),
    ("Felipe II reinó.", "Felipe segundo reinó."),
    ("Alfonso XIII reinó.", "Alfonso trece reinó."),
    ("Estamos en el siglo XXI.", "Estamos en el siglo veintiuno."),
    ("Lea el capítulo III.", "Lea el capítulo tres."),
    ("Tiene 16 GB.", "Tiene dieciséis gigabytes."),
    ("Pesa 21 lb.", "Pesa veintiuna libras."),
    ("Tardó 3 h.", "Tardó tres horas."),
    ("El piso tiene 80 m².", "El piso tiene ochenta metros cuadrados."),
    ("Mide 5 km².", "Mide cinco kilómetros cuadrados."),
    # a number before a noun agrees with it: una/veintiuna/doscientas before a feminine noun,
    # un/veintiún before a masculine one; a number that names (el capítulo 21) does not
    ("Hay 21 personas.", "Hay veintiuna personas."),
    ("Hay 1 mesa.", "Hay una mesa."),
    ("Tiene 500 páginas.", "Tiene quinientas páginas."),
    ("Hay 200 casas.", "Hay doscientas casas."),
    ("Hay 21 libros.", "Hay veintiún libros."),
    ("Hay 1 libro.", "Hay un libro."),
    ("Canta 31 canciones.", "Canta treinta y una canciones."),
    ("Tardó 21 horas.", "Tardó veintiuna horas."),
    ("Son 21 problemas.", "Son veintiún problemas."),
    ("Hay 200 mil personas.", "Hay doscientas mil personas."),
    ("Es el número 1 del mundo.", "Es el número uno del mundo."),
    ("El capítulo 21 trata del mar.", "El capítulo veintiuno trata del mar."),
]

# Italian: decimal comma, thousands dot, numbers written as one word; il 1° maggio = primo
IT = [
    ("Ho 1.000 euro.", "Ho mille euro."),
    ("Pesa 3,5 chili.", "Pesa tre virgola cinque chili."),
    ("Il valore è 1,000.", "Il valore è uno virgola zero zero zero."),
    ("Pi greco vale 3,14.", "Pi greco vale tre virgola quattordici."),
    ("Sono 1.000.000 di persone.", "Sono un milione di persone."),
    ("Ha 25 anni.", "Ha venticinque anni."),
    ("Ci sono 16 sedie.", "Ci sono sedici sedie."),
    ("Ha 21 anni.", "Ha ventuno anni."),
    ("L'appartamento ha 80 m².", "L'appartamento ha ottanta metri quadrati."),
    ("C'è 1 casa.", "C'è una casa."),
    ("Manca 1 ora.", "Manca un'ora."),
    ("C'è 1 libro.", "C'è un libro."),
    ("C'è 1 studente.", "C'è uno studente."),
    ("Il capitolo 1 è breve.", "Il capitolo uno è breve."),
    ("Ci sono 100 libri.", "Ci sono cento libri."),
    ("Costa 2.500 franchi.", "Costa duemilacinquecento franchi."),
    ("Ci sono 999 atleti.", "Ci sono novecentonovantanove atleti."),
    ("Ci sono 48 casi.", "Ci sono quarantotto casi."),
    ("Sono 23 gatti.", "Sono ventitré gatti."),
    ("Il Sig. Rossi arriva.", "Il Signor Rossi arriva."),
    ("La Sig.ra Bianchi parla.", "La Signora Bianchi parla."),
    ("La Sig.na Neri canta.", "La Signorina Neri canta."),
    ("Il Dott. Verdi visita.", "Il Dottor Verdi visita."),
    ("La Dott.ssa Russo visita.", "La Dottoressa Russo visita."),
    ("Il Prof. Conti insegna.", "Il Professor Conti insegna."),
    ("L'Ing. Galli progetta.", "L'Ingegner Galli progetta."),
    ("Mele, pere, ecc.", "Mele, pere, eccetera."),
    ("Abita al n. 5.", "Abita al numero cinque."),
    ("Aggiungi 3/4 di tazza.", "Aggiungi tre quarti di tazza."),
    ("Ci vediamo il 3/4.", "Ci vediamo il tre aprile."),
    ("Mangia 1/3 della torta.", "Mangia un terzo della torta."),
    ("Prendi 2/3 del totale.", "Prendi due terzi del totale."),
    ("Usa 5/8 della corda.", "Usa cinque ottavi della corda."),
    ("Va a 10km/h.", "Va a dieci chilometri orari."),
    ("Pesa 70 kg.", "Pesa settanta chilogrammi."),
    ("È alto 1 m.", "È alto un metro."),
    ("Versa 500 ml.", "Versa cinquecento millilitri."),
    ("Ha corso 5 km.", "Ha corso cinque chilometri."),
    ("Ha atteso 30 min.", "Ha atteso trenta minuti."),
    ("Pesa 1,5 kg.", "Pesa uno virgola cinque chilogrammi."),
    ("Il 2° posto.", "Il secondo posto."),
    ("La 1ª volta.", "La prima volta."),
    ("Il 3º capitolo.", "Il terzo capitolo."),
    ("Il 21° secolo.", "Il ventunesimo secolo."),
    ("Fa 20° oggi.", "Fa venti gradi oggi."),
    ("La versione 2.0.1 è uscita.", "La versione due punto zero punto uno è uscita."),
    ("Sono le 14:30.", "Sono le quattordici e trenta."),
    ("Arriva alle 9:05.", "Arriva alle nove e cinque."),
    ("È l'1:15.", "È l'una e quindici."),
    ("Chiude alle 20:00.", "Chiude alle venti."),
    ("Nel 1492 Colombo partì.", "Nel millequattrocentonovantadue Colombo partì."),
    ("È nato nel 2001.", "È nato nel duemilauno."),
    ("Il 12/05/2026.", "Il dodici maggio duemilaventisei."),
    ("Il 21 maggio.", "Il ventuno maggio."),
    ("Il 1° maggio.", "Il primo maggio."),
    ("Il 2026-03-15.", "Il quindici marzo duemilaventisei."),
    ("Costa 3,50 €.", "Costa tre euro e cinquanta centesimi."),
    ("Costa 20 €.", "Costa venti euro."),
    ("Costa 1 €.", "Costa un euro."),
    ("Costa 0,50 €.", "Costa cinquanta centesimi."),
    ("Costa 25.000 €.", "Costa venticinquemila euro."),
    ("Costa 1.500,50 €.", "Costa millecinquecento euro e cinquanta centesimi."),
    ("Costa 5 $.", "Costa cinque dollari."),
    ("Costa 2 £.", "Costa due sterline."),
    ("Un debito di -20 €.", "Un debito di meno venti euro."),
    ("Ha vinto 1,2 M€.", "Ha vinto uno virgola due milioni di euro."),
    ("Un aumento del 50 %.", "Un aumento del cinquanta per cento."),
    ("Un calo del 2,5%.", "Un calo del due virgola cinque per cento."),
    ("Fa -5 °C.", "Fa meno cinque gradi Celsius."),
    ("Ci sono -3 gradi.", "Ci sono meno tre gradi."),
    ("Chiama lo 06 1234 5678.", "Chiama lo zero sei, uno due tre quattro, cinque sei sette otto."),
    ("Scrivi a anna@esempio.it.", "Scrivi a anna chiocciola esempio punto it."),
    ("Vedi www.esempio.it/aiuto.", "Vedi www punto esempio punto it barra aiuto."),
    ("Luigi XIV regnava.", "Luigi quattordicesimo regnava."),
    ("Leggi il capitolo III.", "Leggi il capitolo tre."),
    ("Ha 16 GB.", "Ha sedici gigabyte."),
    ("Dura 3 h.", "Dura tre ore."),
    ("Pesa 2 lb.", "Pesa due libbre."),
]

# Portuguese (European, as num2words "pt": dezasseis, quilómetro, cêntimo): "e" between
# hundreds, tens and units; dates day "de" month "de" year, day 1 primeiro
PT = [
    ("Tenho 1.000 euros.", "Tenho mil euros."),
    ("Pesa 3,5 quilos.", "Pesa três vírgula cinco quilos."),
    ("O valor é 1,000.", "O valor é um vírgula zero zero zero."),
    ("Pi vale 3,14.", "Pi vale três vírgula catorze."),
    ("São 1.000.000 de pessoas.", "São um milhão de pessoas."),
    ("Tem 25 anos.", "Tem vinte e cinco anos."),
    ("Há 16 cadeiras.", "Há dezasseis cadeiras."),
    ("Há 100 livros.", "Há cem livros."),
    ("Há 101 cães.", "Há cento e um cães."),
    ("Custa 2.500 escudos.", "Custa dois mil e quinhentos escudos."),
    ("Chegaram 999 atletas.", "Chegaram novecentos e noventa e nove atletas."),
    ("Há 47 casos.", "Há quarenta e sete casos."),
    ("Em 1500 chegou Cabral.", "Em mil e quinhentos chegou Cabral."),
    ("O Sr. Silva chegou.", "O Senhor Silva chegou."),
    ("A Sra. Costa fala.", "A Senhora Costa fala."),
    ("O Dr. Santos opera.", "O Doutor Santos opera."),
    ("A Dra. Lima opera.", "A Doutora Lima opera."),
    ("O Prof. Alves ensina.", "O Professor Alves ensina."),
    ("O Eng. Sousa projeta.", "O Engenheiro Sousa projeta."),
    ("Maçãs, peras, etc.", "Maçãs, peras, etcétera."),
    ("Traga fruta, p. ex. maçãs.", "Traga fruta, por exemplo maçãs."),
    ("Mora na Av. Liberdade.", "Mora na Avenida Liberdade."),
    ("Mora no n.º 5.", "Mora no número cinco."),
    ("Junte 3/4 de chávena.", "Junte três quartos de chávena."),
    ("Vemo-nos no dia 3/4.", "Vemo-nos no dia três de abril."),
    ("Coma 1/3 do bolo.", "Coma um terço do bolo."),
    ("Use 2/3 do total.", "Use dois terços do total."),
    ("Vai a 10km/h.", "Vai a dez quilómetros por hora."),
    ("Pesa 70 kg.", "Pesa setenta quilogramas."),
    ("Mede 1 m.", "Mede um metro."),
    ("Junte 500 ml.", "Junte quinhentos mililitros."),
    ("Correu 21 km.", "Correu vinte e um quilómetros."),
    ("Esperou 30 min.", "Esperou trinta minutos."),
    ("Compre 200 g.", "Compre duzentos gramas."),
    ("Ficou em 2º.", "Ficou em segundo."),
    ("Ela ficou em 1ª.", "Ela ficou em primeira."),
    ("O 5.º andar.", "O quinto andar."),
    ("A 21ª edição.", "A vigésima primeira edição."),
    ("A versão 2.0.1 saiu.", "A versão dois ponto zero ponto um saiu."),
    ("São 14h30.", "São catorze e trinta."),
    ("Chega às 9:05.", "Chega às nove e cinco."),
    ("É 1h.", "É uma hora."),
    ("Fecha às 22:00.", "Fecha às vinte e duas horas."),
    ("Abre às 12h.", "Abre às doze horas."),
    ("Nasceu em 2001.", "Nasceu em dois mil e um."),
    ("Em 12/05/2026.", "Em doze de maio de dois mil e vinte e seis."),
    ("No dia 21 de maio.", "No dia vinte e um de maio."),
    ("No 1.º de maio.", "No primeiro de maio."),
    ("Em 2026-03-15.", "Em quinze de março de dois mil e vinte e seis."),
    ("Custa 3,50 €.", "Custa três euros e cinquenta cêntimos."),
    ("Custa 20 €.", "Custa vinte euros."),
    ("Custa 1 €.", "Custa um euro."),
    ("Custa 0,50 €.", "Custa cinquenta cêntimos."),
    ("Custa 25.000 €.", "Custa vinte e cinco mil euros."),
    ("Custa 1.500,50 €.", "Custa mil e quinhentos euros e cinquenta cêntimos."),
    ("Custa 5 $.", "Custa cinco dólares."),
    ("Custa 2 £.", "Custa duas libras."),
    ("Custa R$ 10.", "Custa dez reais."),
    ("Uma dívida de -20 €.", "Uma dívida de menos vinte euros."),
    ("Ganhou 1,2 M€.", "Ganhou um vírgula dois milhões de euros."),
    ("Uma subida de 50 %.", "Uma subida de cinquenta por cento."),
    ("Uma descida de 2,5%.", "Uma descida de dois vírgula cinco por cento."),
    ("Estão -5 °C.", "Estão menos cinco graus Celsius."),
    ("Leia as páginas 10-20.", "Leia as páginas dez a vinte."),
    ("Ligue para 912 345 678.", "Ligue para nove um dois, três quatro cinco, seis sete oito."),
    ("Escreva para ana@exemplo.pt.", "Escreva para ana arroba exemplo ponto pt."),
    ("Veja www.exemplo.pt/ajuda.", "Veja www ponto exemplo ponto pt barra ajuda."),
    ("João VI reinou.", "João sexto reinou."),
    ("Leia o capítulo III.", "Leia o capítulo três."),
    ("Estamos no século XXI.", "Estamos no século vinte e um."),
    ("O apartamento tem 80 m².", "O apartamento tem oitenta metros quadrados."),
    ("Mede 1 km².", "Mede um quilómetro quadrado."),
    ("São 2 pessoas.", "São duas pessoas."),
    ("Há 1 casa.", "Há uma casa."),
    ("Há 200 casas.", "Há duzentas casas."),
    ("Há 1 livro.", "Há um livro."),
    ("Fez 22 viagens.", "Fez vinte e duas viagens."),
    ("Teve 2 lições.", "Teve duas lições."),
    ("Há 2 mil pessoas.", "Há duas mil pessoas."),
    ("Tem 16 GB.", "Tem dezasseis gigabytes."),
]

# Russian: decimal comma read as целых/десятых/сотых, thousands by spaces (also no-break and
# narrow no-break spaces); a noun after a number takes the form the number asks for (1 рубль,
# 2 рубля, 5 рублей; a decimal: рубля); cardinals in the nominative, in the genitive after
# до/от/около/без/... (до трёх процентов); dates dd.mm.yyyy read with ordinal days in the
# genitive (the date of an event: двенадцатого мая ... года), the nominative after сегодня or
# a colon, the dative after к; years before год/года/году/г. as ordinals in that noun's case;
# 14:30 = четырнадцать тридцать; phone groups read as numbers (сорок пять); @ = собака
RU = [
    ("У меня 1 000 рублей.", "У меня тысяча рублей."),
    ("Население 12 500 000 человек.", "Население двенадцать миллионов пятьсот тысяч человек."),
    ("Число 1\u00a0234 тоже.", "Число тысяча двести тридцать четыре тоже."),
    ("Штат 7\u202f000 человек.", "Штат семь тысяч человек."),
    ("Пи равно 3,14.", "Пи равно три целых четырнадцать сотых."),
    ("Рост 1,5 метра.", "Рост одна целая пять десятых метра."),
    ("Вес 2,5 кг.", "Вес две целых пять десятых килограмма."),
    ("Их было 21.", "Их было двадцать один."),
    ("В классе 25 учеников.", "В классе двадцать пять учеников."),
    ("Прошло 2 недели.", "Прошло две недели."),
    ("Осталась 1 минута.", "Осталась одна минута."),
    ("Нужно 1 окно.", "Нужно одно окно."),
    ("Прошло 2 дня.", "Прошло два дня."),
    ("Было 101 предложение.", "Было сто одно предложение."),
    ("Было 11 человек.", "Было одиннадцать человек."),
    ("Купите 22 книги.", "Купите двадцать две книги."),
    ("Было 1985 книг.", "Было тысяча девятьсот восемьдесят пять книг."),
    ("Агент 007 здесь.", "Агент ноль ноль семь здесь."),
    ("Около 5 км.", "Около пяти километров."),
    ("Без 2 минут.", "Без двух минут."),
    # negative numbers, temperatures
    ("Температура -5 градусов.", "Температура минус пять градусов."),
    ("На улице -5 °C.", "На улице минус пять градусов Цельсия."),
    ("Было \u221210 °С.", "Было минус десять градусов Цельсия."),
    # money: the sign before or after the amount
    ("Цена 100 ₽.", "Цена сто рублей."),
    ("Цена 1 ₽.", "Цена один рубль."),
    ("Это 2 руб. в день.", "Это два рубля в день."),
    ("Это стоит 3,50 ₽.", "Это стоит три рубля пятьдесят копеек."),
    ("Это стоит 21 руб.", "Это стоит двадцать один рубль."),
    ("Сдача 50 коп.", "Сдача пятьдесят копеек."),
    ("Это стоит $5.", "Это стоит пять долларов."),
    ("Это стоит 3 $.", "Это стоит три доллара."),
    ("Билет стоит €20.", "Билет стоит двадцать евро."),
    ("Билет стоит 1,99 €.", "Билет стоит один евро девяносто девять центов."),
    ("Бюджет 5 млн руб.", "Бюджет пять миллионов рублей."),
    ("Выручка 1,2 млрд ₽.", "Выручка одна целая две десятых миллиарда рублей."),
    ("Долг до 2 тыс. руб.", "Долг до двух тысяч рублей."),
    # a price with a decimal point and cents (the one decimal point read)
    ("Это стоит $3.50.", "Это стоит три доллара пятьдесят центов."),
    ("Это стоит 3.50 $.", "Это стоит три доллара пятьдесят центов."),
    ("Это стоит $1.01.", "Это стоит один доллар один цент."),
    ("Это стоит €0.99.", "Это стоит девяносто девять центов."),
    ("Это стоит €5.", "Это стоит пять евро."),
    ("Это стоит 5 $.", "Это стоит пять долларов."),
    ("Это стоит 5 руб.", "Это стоит пять рублей."),
    ("Пи 3.14 тут.", "Пи 3.14 тут."),
    # a unit's dot inside a sentence, a plus sign, 24/7
    ("Подождите 5 мин. и идите.", "Подождите пять минут и идите."),
    ("Рост +5 за год.", "Рост плюс пять за год."),
    ("Работаем 24/7.", "Работаем двадцать четыре на семь."),
    # percentages
    ("Рост на 50%.", "Рост на пятьдесят процентов."),
    ("Скидка 1%.", "Скидка один процент."),
    ("Ставка 2,5 %.", "Ставка две целых пять десятых процента."),
    ("Снижение до 3%.", "Снижение до трёх процентов."),
    # units
    ("Пробежал 5 км.", "Пробежал пять километров."),
    ("Скорость 60 км/ч.", "Скорость шестьдесят километров в час."),
    ("Длина 1 м.", "Длина один метр."),
    ("Масса 3 кг.", "Масса три килограмма."),
    ("Добавьте 200 г сахара.", "Добавьте двести граммов сахара."),
    ("Налейте 500 мл воды.", "Налейте пятьсот миллилитров воды."),
    ("Прошло 30 мин.", "Прошло тридцать минут."),
    ("Диск на 16 ГБ.", "Диск на шестнадцать гигабайт."),
    ("Ехать 2 ч.", "Ехать два часа."),
    # ordinals written with a case ending
    ("Он пришёл 5-м.", "Он пришёл пятым."),
    ("Это 5-й дом.", "Это пятый дом."),
    ("Она 2-я в списке.", "Она вторая в списке."),
    ("Мы на 3-м этаже.", "Мы на третьем этаже."),
    ("Это 1-е место.", "Это первое место."),
    ("В 1990-х годах.", "В тысяча девятьсот девяностых годах."),
    # years
    ("Это было в 2026 году.", "Это было в две тысячи двадцать шестом году."),
    ("Наступил 2026 год.", "Наступил две тысячи двадцать шестой год."),
    ("Весна 1990 года.", "Весна тысяча девятьсот девяностого года."),
    ("Он родился в 1985 г.", "Он родился в тысяча девятьсот восемьдесят пятом году."),
    # dates
    ("Встреча 12.05.2026.", "Встреча двенадцатого мая две тысячи двадцать шестого года."),
    ("Сегодня 01.09.2026.", "Сегодня первое сентября две тысячи двадцать шестого года."),
    ("Он родился 5 мая 1990 года.", "Он родился пятого мая тысяча девятьсот девяностого года."),
    ("До 31 декабря.", "До тридцать первого декабря."),
    ("К 1 сентября.", "К первому сентября."),
    ("Дата: 2026-03-15.", "Дата: пятнадцатое марта две тысячи двадцать шестого года."),
    # times
    ("Встреча в 14:30.", "Встреча в четырнадцать тридцать."),
    ("Подъём в 7:05.", "Подъём в семь ноль пять."),
    ("Начало в 9:00.", "Начало в девять часов."),
    ("Открыто с 9:00 до 18:00.", "Открыто с девяти часов до восемнадцати часов."),
    # fractions and ranges
    ("Возьмите 3/4 стакана.", "Возьмите три четвёртых стакана."),
    ("Это 1/2 яблока.", "Это одна вторая яблока."),
    ("Это 2/3 пути.", "Это две третьих пути."),
    ("Прочтите страницы 10-20.", "Прочтите страницы десять-двадцать."),
    ("Будет 2–3 дня.", "Будет два-три дня."),
    # phone numbers, emails, addresses
    ("Звоните +7 495 123-45-67.",
     "Звоните плюс семь, четыреста девяносто пять, сто двадцать три, сорок пять, шестьдесят семь."),
    ("Звоните 8 (800) 555-35-35.",
     "Звоните восемь, восемьсот, пятьсот пятьдесят пять, тридцать пять, тридцать пять."),
    ("Пишите на ivan@example.ru.", "Пишите на ivan собака example точка ru."),
    ("Сайт www.example.ru/help.", "Сайт www точка example точка ru слэш help."),
    ("Версия 2.0.1 вышла.", "Версия два точка ноль точка один вышла."),
    # abbreviations and titles
    ("Это т. е. важно.", "Это то есть важно."),
    ("Яблоки, груши и т. д.", "Яблоки, груши и так далее."),
    ("Фрукты, овощи и т.п.", "Фрукты, овощи и тому подобное."),
    ("Проф. Иванов читает.", "Профессор Иванов читает."),
    ("Г-н Петров пришёл.", "Господин Петров пришёл."),
    ("Это г. Москва.", "Это город Москва."),
    ("Адрес: ул. Ленина, д. 5, кв. 12.", "Адрес: улица Ленина, дом пять, квартира двенадцать."),
    ("См. рис. 3.", "Смотри рисунок три."),
    ("Дом № 7.", "Дом номер семь."),
    # Roman numerals: centuries, rulers, chapters
    ("Это XXI век.", "Это двадцать первый век."),
    ("В XIX веке.", "В девятнадцатом веке."),
    ("Пётр I основал город.", "Пётр Первый основал город."),
    ("Глава III называется так.", "Глава третья называется так."),
    # square and cubic units: an adjective before the noun (два квадратных метра)
    ("Площадь 80 м².", "Площадь восемьдесят квадратных метров."),
    ("Комната 2 м².", "Комната два квадратных метра."),
    ("Это 2,5 м².", "Это две целых пять десятых квадратного метра."),
    ("Объём 3 м³.", "Объём три кубических метра."),
    ("Около 5 км².", "Около пяти квадратных километров."),
]

# Japanese: kanji numerals (千, 一万: no 一 before 十, 百, 千), digits one by one where a
# number is not a quantity (phone numbers, leading zeros) with 〇 and の between groups;
# decimals 三点一四; dates 年月日, times 時分, percent パーセント, a currency sign becomes
# its word after the amount (¥ 円, $ ドル), units in katakana (km キロメートル), 60 km/h
# 時速六十キロメートル; 3/4 is 四分の三, a date (三月四日) when a weekday follows
JA = [
    ("りんごが3個あります。", "りんごが三個あります。"),
    ("参加者は1,000人です。", "参加者は千人です。"),
    ("人口は12,345,678人。", "人口は千二百三十四万五千六百七十八人。"),
    ("合計1,234,567円", "合計百二十三万四千五百六十七円"),
    ("10000円です。", "一万円です。"),
    ("3万5000円", "三万五千円"),
    ("1.5億円", "一点五億円"),
    ("１２３円", "百二十三円"),
    ("2人で行く。", "二人で行く。"),
    ("部屋番号は0123です。", "部屋番号は〇一二三です。"),
    ("コードは12345678901234567890です。", "コードは12345678901234567890です。"),
    ("円周率は3.14です。", "円周率は三点一四です。"),
    ("0.5キロ", "零点五キロ"),
    ("約3.5km", "約三点五キロメートル"),
    # money: the sign's word after the amount
    ("価格は¥1,500です。", "価格は千五百円です。"),
    ("価格は1,500円です。", "価格は千五百円です。"),
    ("￥1000です", "千円です"),
    ("それは$5です。", "それは五ドルです。"),
    ("それは$3.50です。", "それは三ドル五十セントです。"),
    ("€20かかります。", "二十ユーロかかります。"),
    ("£5でした。", "五ポンドでした。"),
    # negative numbers, temperatures, percentages
    ("気温は-5℃です。", "気温はマイナス五度です。"),
    ("気温は25°Cです。", "気温は二十五度です。"),
    ("-3℃まで下がる。", "マイナス三度まで下がる。"),
    ("-10から始めます。", "マイナス十から始めます。"),
    ("成長率は50%です。", "成長率は五十パーセントです。"),
    ("金利は2.5％です。", "金利は二点五パーセントです。"),
    # units
    ("5kmを走った。", "五キロメートルを走った。"),
    ("60km/hで走る。", "時速六十キロメートルで走る。"),
    ("時速60km/hで走る。", "時速六十キロメートルで走る。"),
    ("時速10〜20km/hで走る。", "時速十から二十キロメートルで走る。"),
    ("体重は70kgです。", "体重は七十キログラムです。"),
    ("水を500ml入れる。", "水を五百ミリリットル入れる。"),
    ("砂糖200g", "砂糖二百グラム"),
    ("容量は16GBです。", "容量は十六ギガバイトです。"),
    ("長さ30cmの棒", "長さ三十センチメートルの棒"),
    ("100m走", "百メートル走"),
    # dates and years
    ("2026年5月12日に会いましょう。", "二千二十六年五月十二日に会いましょう。"),
    ("締め切りは2026-03-15です。", "締め切りは二千二十六年三月十五日です。"),
    ("2026/4/1から", "二千二十六年四月一日から"),
    ("12月25日", "十二月二十五日"),
    ("4月1日(水)", "四月一日(水)"),
    ("3/4(金)に会議。", "三月四日(金)に会議。"),
    ("1990年代の音楽", "千九百九十年代の音楽"),
    ("令和8年", "令和八年"),
    # times
    ("会議は14:30からです。", "会議は十四時三十分からです。"),
    ("9:00に集合。", "九時に集合。"),
    ("7:05に起きた。", "七時五分に起きた。"),
    ("午後3時に来て。", "午後三時に来て。"),
    ("2時間30分", "二時間三十分"),
    ("5分待って。", "五分待って。"),
    ("10時間", "十時間"),
    # fractions, ordinals, ranges
    ("3/4カップの水", "四分の三カップの水"),
    ("1/2を使う。", "二分の一を使う。"),
    ("第1回大会", "第一回大会"),
    ("1位になった。", "一位になった。"),
    ("2番目の人", "二番目の人"),
    ("10〜20人が来た。", "十から二十人が来た。"),
    ("3～5日かかる。", "三から五日かかる。"),
    ("バージョン2.0.1", "バージョン二点零点一"),
    # phone numbers, postal codes, addresses
    ("電話は03-1234-5678です。", "電話は〇三の一二三四の五六七八です。"),
    ("携帯090-1234-5678", "携帯〇九〇の一二三四の五六七八"),
    ("〒100-0001 東京都", "郵便番号一〇〇の〇〇〇一 東京都"),
    ("メールはtaro@example.jpです。", "メールはtaro アット example ドット jpです。"),
    ("詳細はhttps://example.jp/helpへ。", "詳細はexample ドット jp スラッシュ helpへ。"),
    # abbreviations, Roman numerals
    ("㈱山田商事", "株式会社山田商事"),
    ("(株)山田商事", "株式会社山田商事"),
    ("第Ⅱ章を読む。", "第二章を読む。"),
    ("ルイⅩⅣ世", "ルイ十四世"),
    ("面積は80m²です。", "面積は八十平方メートルです。"),
    ("体積は3m³です。", "体積は三立方メートルです。"),
]

# Korean: Sino-Korean numerals (천, 만: no 일 before 십, 백, 천, 만), grouped by 만 with a
# space (한글 맞춤법 제44항); native numerals before counters of things, people, age and
# hours (세 개, 스무 살, 열네 시) up to 99; 6월 유월, 10월 시월; spacing as written, a space
# before a word that replaces a sign (오 달러, 오십 퍼센트); digits one by one with 공 for
# zero; decimals 삼 점 일사; -5°C 영하 오 도; 3/4 사분의 삼, a date when a weekday follows
KO = [
    ("사과가 3개 있어요.", "사과가 세개 있어요."),
    ("학생 25명이 왔다.", "학생 스물다섯명이 왔다."),
    ("20살이에요.", "스무살이에요."),
    ("21살이에요.", "스물한살이에요."),
    ("고양이 2마리", "고양이 두마리"),
    ("커피 1잔 주세요.", "커피 한잔 주세요."),
    ("3시간 걸려요.", "세시간 걸려요."),
    ("100명이 왔다.", "백명이 왔다."),
    ("참가자는 1,000명입니다.", "참가자는 천명입니다."),
    ("인구는 12,345,678명", "인구는 천이백삼십사만 오천육백칠십팔명"),
    ("합계 1,234,567원", "합계 백이십삼만 사천오백육십칠원"),
    ("10000원입니다.", "만원입니다."),
    ("3만 5천원", "삼만 오천원"),
    ("1.5억원", "일 점 오억원"),
    ("방 번호는 0123입니다.", "방 번호는 공일이삼입니다."),
    ("코드는 12345678901234567890입니다.", "코드는 12345678901234567890입니다."),
    ("원주율은 3.14입니다.", "원주율은 삼 점 일사입니다."),
    ("0.5킬로", "영 점 오킬로"),
    # money
    ("가격은 5,000원입니다.", "가격은 오천원입니다."),
    ("가격은 ₩5,000입니다.", "가격은 오천 원입니다."),
    ("$5예요.", "오 달러예요."),
    ("$3.50입니다.", "삼 달러 오십 센트입니다."),
    ("€20입니다.", "이십 유로입니다."),
    ("¥1000", "천 엔"),
    # negative numbers, temperatures, percentages
    ("기온은 -5°C입니다.", "기온은 영하 오 도입니다."),
    ("기온은 25℃입니다.", "기온은 이십오 도입니다."),
    ("-3℃까지 내려간다.", "영하 삼 도까지 내려간다."),
    ("-10부터 시작", "마이너스 십부터 시작"),
    ("성장률은 50%입니다.", "성장률은 오십 퍼센트입니다."),
    ("금리는 2.5%입니다.", "금리는 이 점 오 퍼센트입니다."),
    # units
    ("5km를 달렸다.", "오 킬로미터를 달렸다."),
    ("60km/h로 달린다.", "시속 육십 킬로미터로 달린다."),
    ("시속 60km/h로 달린다.", "시속 육십 킬로미터로 달린다."),
    ("몸무게는 70kg입니다.", "몸무게는 칠십 킬로그램입니다."),
    ("물 500ml", "물 오백 밀리리터"),
    ("설탕 200g", "설탕 이백 그램"),
    ("용량은 16GB입니다.", "용량은 십육 기가바이트입니다."),
    ("100m 달리기", "백 미터 달리기"),
    # dates and years
    ("2026년 5월 12일에 만나요.", "이천이십육년 오월 십이일에 만나요."),
    ("6월 6일은 현충일입니다.", "유월 육일은 현충일입니다."),
    ("10월 9일은 한글날입니다.", "시월 구일은 한글날입니다."),
    ("12월 25일", "십이월 이십오일"),
    ("마감은 2026-03-15입니다.", "마감은 이천이십육년 삼월 십오일입니다."),
    ("2026.4.1.부터", "이천이십육년 사월 일일부터"),
    ("3/4(금)에 회의", "삼월 사일(금)에 회의"),
    ("1990년대 음악", "천구백구십년대 음악"),
    # times
    ("회의는 14:30에 시작합니다.", "회의는 열네 시 삼십 분에 시작합니다."),
    ("9:00에 모여요.", "아홉 시에 모여요."),
    ("7:05에 일어났다.", "일곱 시 오 분에 일어났다."),
    ("오후 3시에 와요.", "오후 세시에 와요."),
    ("2시간 30분", "두시간 삼십분"),
    ("5분 기다려요.", "오분 기다려요."),
    # fractions, ordinals, ranges
    ("3/4컵", "사분의 삼컵"),
    ("1/2을 쓴다.", "이분의 일을 쓴다."),
    ("제1회 대회", "제일회 대회"),
    ("1위를 했다.", "일위를 했다."),
    ("2번째 사람", "두번째 사람"),
    ("1번째 줄", "첫번째 줄"),
    ("10~20명이 왔다.", "열 명에서 스무 명이 왔다."),
    ("3~5일 걸린다.", "삼에서 오일 걸린다."),
    # phone numbers, emails, URLs
    ("전화번호는 010-1234-5678입니다.", "전화번호는 공일공, 일이삼사, 오육칠팔입니다."),
    ("02-123-4567로 전화하세요.", "공이, 일이삼, 사오육칠로 전화하세요."),
    ("메일은 kim@example.kr입니다.", "메일은 kim 골뱅이 example 점 kr입니다."),
    ("홈페이지는 www.example.kr/help입니다.", "홈페이지는 www 점 example 점 kr 슬래시 help입니다."),
    # abbreviations, Roman numerals
    ("㈜한국전자", "주식회사한국전자"),
    ("(주)한국전자", "주식회사한국전자"),
    ("제Ⅱ장", "제이장"),
    ("면적은 80m²입니다.", "면적은 팔십 제곱미터입니다."),
]

TABLES = {"en": EN, "fr": FR, "de": DE, "es": ES, "it": IT, "pt": PT, "ru": RU, "ja": JA, "ko": KO}
CASES = [(lang, src, want) for lang, rows in TABLES.items() for src, want in rows]
IDS = [f"{lang}-{i}" for lang, rows in TABLES.items() for i in range(len(rows))]

# Abbreviations, unit symbols, suffixes and numerals the output spells out: the only
# alphabetic tokens of an input that may be missing from its reading.
ABBREVIATIONS = {
    "Dr", "St", "Mr", "Mrs", "Ms", "Prof", "etc", "No", "nd", "st", "rd", "th", "am", "pm", "km", "kg", "ml",
    "mph", "GB", "www", "https", "http", "v", "VIII", "XIV", "II", "IV", "Mme", "Mlle", "av", "er", "re", "e",
    "Ier", "XIXe", "III", "ème", "Ste", "Fr", "Hr", "usw", "bzw", "ca", "min", "Nr", "z", "B", "d", "h", "m",
    "M", "Str", "Hauptstr", "sec", "no", "pp", "approx", "incl", "S", "Vol", "ch",
    # Spanish, Italian, Portuguese
    "Sr", "Sra", "Srta", "Dra", "Dott", "Sig", "ra", "na", "ssa", "Ing", "Eng", "ecc", "ej", "ex", "p", "Av", "n",
    "º", "ª", "g", "XIII", "XXI", "VI", "R", "lb",
    # Russian
    "C", "С", "XIX", "I", "км", "кг", "мл", "ГБ", "млн", "млрд",
    # Japanese, Korean
    "cm",
}


def test_table_sizes():
    assert all(len(rows) >= 60 for rows in TABLES.values()), {k: len(v) for k, v in TABLES.items()}


@pytest.mark.parametrize(("lang", "src", "want"), CASES, ids=IDS)
def test_reading(lang, src, want):
    got = normalize(src, lang)
    assert got == want
    assert normalize(got, lang) == got  # idempotent on its own output
    # words: runs of Latin letters, or of letters of other scripts (Japanese and Korean
    # write units and names next to their words: 5kmを -> km, を); numerals (Ⅱ) and
    # superscripts (m²) are not words
    words = re.findall(r"[A-Za-z\u00c0-\u024f]+|[^\W\d_A-Za-z\u00c0-\u024f\u00b2\u00b3\u2160-\u2188]+", src)
    missing = [w for w in words if w not in ABBREVIATIONS and w not in got]
    assert not missing, f"dropped {missing}"


@pytest.mark.parametrize("lang", ["en", "fr", "de", "es", "it", "pt", "ru", "ja", "ko"])
@pytest.mark.parametrize("text", [
    "Hello there, how are you?", "Plan B is fine.", "I think, therefore I am.",
    "Bonjour à tous, ça va ?", "Guten Tag, wie geht es?", "", "   ",
    "Hola, ¿qué tal?", "Ciao a tutti, come va?", "Olá, tudo bem?",
    "Привет, как дела? Всё хорошо.", "Это Иван и Мария.",
    "こんにちは、元気ですか？", "東京は晴れです。", "안녕하세요, 잘 지내요?", "我们明天见。",
])
def test_nothing_to_normalize_passes_through(lang, text):
    assert normalize(text, lang) == text


@pytest.mark.parametrize("lang", ["en", "fr", "de", "es", "it", "pt", "ru", "ja", "ko"])
@pytest.mark.parametrize("text", [
    "12345678901234567890",  # too long to read: as written
    "31/02/2026",            # no such date
    "31.02.2026",
    "Hello 👋 world! 🎉",
    "Hello 你好 мир",
    "# & * ~ | ^",
    "%", "$", "€", "/", "-", "°", ".", "@",
    "％", "￥", "₩", "₽", "№", "〒", "()", "（）",
    "1/0", "99:99", "2026-13-45",  # no such fraction, time or date
])
def test_unreadable_passes_through(lang, text):
    assert normalize(text, lang) == text


def test_long_digits_inside_text_and_mixed_symbols():
    assert normalize("Code 123456789012345678 now.") == "Code 123456789012345678 now."
    out = normalize("Emoji 🎉 costs $5 😀.")
    assert out == "Emoji 🎉 costs five dollars 😀."


def test_languages_and_auto():
    assert resolve_language("English") == "en" and resolve_language("FR") == "fr"
    assert resolve_language("german") == "de" and resolve_language("auto") is None
    assert normalize("I have 2 cats.", "english") == "I have two cats."
    assert normalize("I have 2 cats.", "auto") == "I have two cats."
    assert normalize("我有 2 只猫", "auto") == "我有 2 只猫"  # another script: left for the model
    assert resolve_language("spanish") == "es" and resolve_language("Italian") == "it"
    assert resolve_language("portuguese") == "pt" and resolve_language("pt-BR") == "pt"
    assert normalize("Tengo 2 gatos.", "spanish") == "Tengo dos gatos."
    assert supports("french") and supports("auto") and not supports("klingon")
    # Qwen3-TTS language names and ISO codes select Russian, Japanese, Korean
    assert resolve_language("russian") == "ru" and resolve_language("RU") == "ru"
    assert resolve_language("Japanese") == "ja" and resolve_language("ja-JP") == "ja"
    assert resolve_language("korean") == "ko" and resolve_language("ko_KR".replace("_", "-")) == "ko"
    assert normalize("Это стоит 5 ₽.", "russian") == "Это стоит пять рублей."
    assert normalize("5個", "japanese") == "五個" and normalize("5개", "korean") == "다섯개"
    # Chinese is not covered (num2words has no Chinese): refused when asked, left as written by auto
    assert not supports("chinese") and not supports("zh")
    with pytest.raises(InputError, match="Chinese is not covered"):
        normalize("我有 2 只猫", "chinese")
    assert normalize("我有 2 只猫，价格是 3.5 元。", "auto") == "我有 2 只猫，价格是 3.5 元。"
    assert normalize("Это стоит 5 ₽.", "auto") == "Это стоит 5 ₽."  # auto: English or nothing
    with pytest.raises(InputError, match="supported: en .english., fr .french., de .german., es .spanish., it .italian., pt .portuguese."):
        normalize("2 cats", "klingon")
    with pytest.raises(InputError, match="must be a string"):
        normalize(5, "en")  # type: ignore[arg-type]


def test_cli_text_normalize():
    env_src = str(Path(__file__).resolve().parents[2] / "src")
    import os

    env = {**os.environ, "PYTHONPATH": env_src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-m", "vocalis", "text", "normalize", "--language", "de",
                        "Am 3. Mai kostet es 5 €."], check=False, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Am dritten Mai kostet es fünf Euro.\n"
    r = subprocess.run([sys.executable, "-m", "vocalis", "text", "normalize", "--language", "japanese", "-"],
                       input="5個で¥1,500です。", check=False, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "五個で千五百円です。\n"
    r = subprocess.run([sys.executable, "-m", "vocalis", "text", "normalize", "--language", "xx", "2"],
                       check=False, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2 and r.stderr.startswith("error: text normalization does not cover")


# --------------------------------------------------------------------------- API and server

SMALL = "english_2m_2026-10"
RAW = "I paid $5 on 3/4."
READ = "I paid five dollars on March fourth."


@pytest.fixture(scope="module")
def ckpt(checkpoints) -> Path:
    return checkpoints.get(SMALL)


@pytest.fixture(scope="module")
def tts(ckpt):
    import vocalis

    t = vocalis.load(str(ckpt), max_batch=4, max_queue=16)
    yield t
    t.close()


def _chunk_texts(req) -> str:
    for _ in req.events():
        pass
    return " ".join(c["text"] for c in req.stats.chunks)


def test_api_normalize(tts, ckpt):
    voice = tts.voice(str(ckpt / "voice.wav"))
    on = _chunk_texts(tts.submit(RAW, voice, seed=1, normalize=True, max_frames=2))
    off = _chunk_texts(tts.submit(RAW, voice, seed=1, max_frames=2))
    assert "five dollars" in on and "March fourth" in on and "$5" not in on
    assert "$5" in off and "3/4" in off
    a = tts.synthesize(RAW, voice, seed=1, normalize=True, max_frames=2)
    b = tts.synthesize(READ, voice, seed=1, max_frames=2)
    assert np.array_equal(a.samples, b.samples)
    with pytest.raises(InputError, match="true or false"):
        tts.submit(RAW, voice, normalize="yes")


def test_exact_model_refuses_normalize(ckpt):
    import vocalis

    t = vocalis.load(str(ckpt), exact=True, max_batch=1)
    try:
        with pytest.raises(InputError, match="exact mode is for parity"):
            t.submit(RAW, t.voice(str(ckpt / "voice.wav")), normalize=True)
    finally:
        t.close()


def test_server_default_and_override(tts, ckpt, tmp_path):
    pytest.importorskip("uvicorn")
    pytest.importorskip("av")
    from tests.server.test_server import Server

    from vocalis.server import create_app

    def pcm(server, text, **extra):
        body = {"model": "tts-1", "input": text, "voice": "alloy", "response_format": "pcm",
                "seed": 3, "max_frames": 2, **extra}
        status, _, data = server.request("POST", "/v1/audio/speech", body)
        assert status == 200, data
        return data

    s = Server(create_app(tts, voices_dir=tmp_path / "v1", default_voice=str(ckpt / "voice.wav")))
    try:
        read = pcm(s, READ)
        assert pcm(s, RAW) == read                     # on by default
        assert pcm(s, RAW, normalize=False) != read    # the request turns it off
        status, _, data = s.request("POST", "/v1/audio/speech",
                                    {"model": "tts-1", "input": RAW, "voice": "alloy", "normalize": "x"})
        assert status == 400 and b"normalize" in data
    finally:
        s.stop()
    s = Server(create_app(tts, voices_dir=tmp_path / "v2", default_voice=str(ckpt / "voice.wav"),
                          normalize=False))
    try:
        assert pcm(s, RAW) != read                     # --no-normalize
        assert pcm(s, RAW, normalize=True) == read     # the request turns it on
    finally:
        s.stop()


def test_batch_normalize(tts, ckpt, tmp_path):
    import json

    from vocalis.bench import run_batch

    def wav(text, out, **kw):
        reqs = tmp_path / f"{out}.json"
        reqs.write_text(json.dumps([{"text": text, "voice": str(ckpt / "voice.wav"),
                                     "options": {"seed": 1, "max_frames": 2}}]))
        rep, rc = run_batch(str(ckpt), reqs, tmp_path / out, sequential=True, tts=tts, **kw)
        assert rc == 0, rep["failures"]
        return (tmp_path / out / rep["requests"][-1]["wav"]).read_bytes()

    assert wav(RAW, "on", normalize=True) == wav(READ, "read")
    assert wav(RAW, "off") != wav(READ, "read2")


def test_qwen3_normalizes_in_the_request_language(tmp_path):
    import vocalis
    from vocalis.models.qwen3.random_checkpoint import write_random_checkpoint

    d = write_random_checkpoint("qwen3-tts/0.6b-customvoice", tmp_path / "cv", seed=2, tiny=True)
    with vocalis.load(str(d), max_batch=2) as t:
        speaker = t.speakers[0]
        de = _chunk_texts(t.submit("Es kostet 5 €.", speaker=speaker, language="german", normalize=True,
                                   max_frames=2))
        assert de == "Es kostet fünf Euro."
        ru = _chunk_texts(t.submit("Это стоит 5 ₽.", speaker=speaker, language="russian", normalize=True,
                                   max_frames=2))
        assert ru == "Это стоит пять рублей."
        ko = _chunk_texts(t.submit("사과 3개", speaker=speaker, language="Korean", normalize=True, max_frames=2))
        assert ko == "사과 세개"
        auto = _chunk_texts(t.submit(RAW, speaker=speaker, normalize=True, max_frames=2))
        assert auto == READ  # language auto: English
        assert _chunk_texts(t.submit(RAW, speaker=speaker, max_frames=2)) == RAW
        with pytest.raises(InputError, match="does not cover language 'chinese'"):
            t.submit(RAW, speaker=speaker, language="chinese", normalize=True)


@pytest.mark.parametrize("text,lang,want", [
    ("It costs €1,250/month.", "en", "It costs one thousand two hundred and fifty euros per month."),
    ("$20/hour", "en", "twenty dollars per hour"),
    ("1.250 €/Monat", "de", "eintausendzweihundertfünfzig Euro pro Monat"),
    ("100 €/mois", "fr", "cent euros par mois"),
    ("and/or", "en", "and/or"),
    ("inkl. MwSt. und zzgl. Versand", "de", "inklusive Mehrwertsteuer und zuzüglich Versand"),
])
def test_rates_and_german_tax_abbreviations(text, lang, want):
    assert normalize(text, lang) == want


def test_cli_stdin_keeps_no_extra_blank_line():
    r = subprocess.run([sys.executable, "-m", "vocalis", "text", "normalize", "-"],
                       input=b"42 apples.\n", capture_output=True, timeout=60)
    assert r.returncode == 0 and r.stdout == b"forty-two apples.\n"
